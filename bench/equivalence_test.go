package bench

import (
	"context"
	"testing"
	"time"

	retrygo "github.com/avast/retry-go/v5"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethretry "github.com/sethvargo/go-retry"
	sgbackoff "github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// TestEquivalentWorkloads checks that the libraries are configured alike:
// for every workload each makes the same number of attempts and agrees on
// success or failure, so the benchmarks compare like with like.
func TestEquivalentWorkloads(t *testing.T) {
	ctx := context.Background()
	libs := map[string]func(w workload, op func() (int, error)) error{
		"stormguard": func(w workload, op func() (int, error)) error {
			_, err := retry.Do(ctx, &retry.Policy{MaxAttempts: w.attempts, Backoff: sgbackoff.Constant{}}, func(context.Context) (int, error) { return op() })
			return err
		},
		"retry-go": func(w workload, op func() (int, error)) error {
			_, err := retrygo.NewWithData[int](retrygo.Attempts(uint(w.attempts)), retrygo.Delay(0), retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx), retrygo.LastErrorOnly(true)).Do(op)
			return err
		},
		"cenkalti": func(w workload, op func() (int, error)) error {
			_, err := backoff.Retry(ctx, op, backoff.WithBackOff(&backoff.ZeroBackOff{}), backoff.WithMaxTries(uint(w.attempts)))
			return err
		},
		"sethvargo": func(w workload, op func() (int, error)) error {
			zero := sethretry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
			_, err := sethretry.DoValue(ctx, sethretry.WithMaxRetries(uint64(w.attempts-1), zero), func(context.Context) (int, error) {
				v, err := op()
				if err != nil {
					return v, sethretry.RetryableError(err)
				}
				return v, nil
			})
			return err
		},
		"failsafe-go": func(w workload, op func() (int, error)) error {
			_, err := failsafe.With[int](retrypolicy.NewBuilder[int]().WithMaxAttempts(w.attempts).WithDelay(0).Build()).Get(op)
			return err
		},
	}
	for _, w := range workloads {
		wantAttempts, wantOK := w.fail+1, true
		if w.fail < 0 {
			wantAttempts, wantOK = w.attempts, false
		}
		for name, run := range libs {
			f := &flaky{fail: w.fail}
			calls := 0
			err := run(w, func() (int, error) { calls++; return f.call() })
			if calls != wantAttempts || (err == nil) != wantOK {
				t.Errorf("%s/%s: %d attempts, err=%v; want %d attempts, success=%v", w.name, name, calls, err, wantAttempts, wantOK)
			}
		}
	}
}
