package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

func ExampleDo() {
	p := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Exponential{Base: time.Millisecond, Max: 10 * time.Millisecond, Jitter: backoff.Full},
	}
	calls := 0
	v, err := retry.Do(context.Background(), p, func(ctx context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", errors.New("503 service unavailable")
		}
		return "hello", nil
	})
	fmt.Println(v, err, calls)
	// Output: hello <nil> 3
}

func ExampleDo_exhausted() {
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}}
	_, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
		return 0, errors.New("connection refused")
	})
	var re *retry.Error
	errors.As(err, &re)
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrAttemptsExhausted), re.Attempts)
	// Output:
	// retry: attempts exhausted after 3 attempts: connection refused
	// true 3
}

func ExamplePermanent() {
	calls := 0
	err := retry.Run(context.Background(), nil, func(ctx context.Context) error {
		calls++
		return retry.Permanent(errors.New("400 bad request"))
	})
	fmt.Println(err, calls, retry.IsPermanent(err))
	// Output: 400 bad request 1 true
}

func ExampleAfter() {
	// A server said "Retry-After: 1"; the next wait is at least 1s, capped
	// by MaxRetryAfter. Here the caller's deadline cannot hold it, so Do
	// stops at once instead of sleeping only to fail.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := retry.Do(ctx, nil, func(ctx context.Context) (int, error) {
		return 0, retry.After(errors.New("429 too many requests"), time.Second)
	})
	fmt.Println(errors.Is(err, context.DeadlineExceeded), time.Since(start) < 400*time.Millisecond)
	// Output: true true
}
