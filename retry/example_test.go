package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
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
	// A server said "Retry-After: 20"; the next wait is at least 20s
	// (advice beyond MaxRetryAfter would stop the call with
	// ErrAdviceExceedsCap). Here the caller's deadline cannot hold it, so
	// Do stops at once instead of sleeping only to fail, and says the stop
	// was predictive: the caller's context is still live.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := retry.Do(ctx, nil, func(ctx context.Context) (int, error) {
		return 0, retry.After(errors.New("429 too many requests"), 20*time.Second)
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrDeadlineTooClose), errors.Is(err, context.DeadlineExceeded), ctx.Err() == nil)
	// Output:
	// retry: deadline too close: it cannot hold the next wait and attempt after 1 attempts: 429 too many requests
	// true true true
}

// A zero MaxAttempts means DefaultMaxAttempts (3): no Policy retries
// forever unless it asks for retry.Unlimited.
func ExamplePolicy_defaultMaxAttempts() {
	calls := 0
	_, err := retry.Do(context.Background(), &retry.Policy{Backoff: backoff.Constant{}}, func(ctx context.Context) (int, error) {
		calls++
		return 0, errors.New("connection refused")
	})
	fmt.Println(calls, errors.Is(err, retry.ErrAttemptsExhausted))
	// Output: 3 true
}

// A panicking operation is reported as a failed attempt to the breaker,
// the budget and the Observer, then the panic goes on to the caller.
func ExampleDo_panic() {
	b := budget.NewConcurrency(budget.ConcurrencyConfig{})
	defer func() {
		active, _ := b.Active()
		fmt.Println("recovered:", recover(), "active attempts:", active)
	}()
	retry.Do(context.Background(), &retry.Policy{Budget: b}, func(ctx context.Context) (int, error) {
		panic("boom")
	})
	// Output: recovered: boom active attempts: 0
}

// When the caller's context ends with a cause of its own, errors.Is finds
// the cause in Do's error.
func ExampleError_cause() {
	errShutdown := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShutdown)
	_, err := retry.Do(ctx, nil, func(ctx context.Context) (int, error) { return 1, nil })
	fmt.Println(err)
	fmt.Println(errors.Is(err, context.Canceled), errors.Is(err, errShutdown))
	// Output:
	// context canceled (cause: shutting down) (after 0 attempts)
	// true true
}
