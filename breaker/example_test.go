package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

var errBackend = errors.New("backend unavailable")

// report makes one call through b that returns err, and prints the
// outcome and the state after it.
func report(b *breaker.Breaker, err error) {
	done, aerr := b.Allow()
	if aerr != nil {
		fmt.Printf("refused: %v\n", aerr)
		return
	}
	done(err)
	fmt.Printf("%-8v -> %v\n", outcomeName(err), b.State())
}

func outcomeName(err error) string {
	if err == nil {
		return "ok"
	}
	return "failed"
}

// The consecutive-failures condition suits low, steady traffic to a single
// dependency: three failures in a row open the breaker.
func ExampleNew_consecutiveFailures() {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{
		ConsecutiveFailures: 3,
		OpenTimeout:         30 * time.Second,
		OpenJitter:          -1,
		Clock:               clk,
	})
	report(b, errBackend)
	report(b, nil) // a success ends the run
	report(b, errBackend)
	report(b, errBackend)
	report(b, errBackend)
	report(b, nil)
	clk.Advance(30 * time.Second)
	fmt.Println("after the open timeout:", b.State())
	report(b, nil) // the probe succeeds
	// Output:
	// failed   -> closed
	// ok       -> closed
	// failed   -> closed
	// failed   -> closed
	// failed   -> open
	// refused: breaker: open
	// after the open timeout: half-open
	// ok       -> closed
}

// A count window judges the failure rate of the last N calls, whatever
// their pace: here half of the last 10 calls, once 6 calls have been made.
func ExampleNew_countWindow() {
	b := breaker.New(breaker.Config{
		Window: breaker.Window{Calls: 10, MinCalls: 6, FailureRatio: 0.5},
		Clock:  clocktest.NewFake(),
	})
	for _, err := range []error{nil, errBackend, nil, errBackend, errBackend} {
		done, _ := b.Allow()
		done(err)
	}
	c := b.Counts()
	fmt.Printf("%d calls, %.0f%% failed: %v\n", c.Calls(), 100*c.FailureRate(), b.State())
	report(b, nil)
	report(b, errBackend)
	// Output:
	// 5 calls, 60% failed: closed
	// ok       -> open
	// refused: breaker: open
}

// A time window judges the calls of the last period. This is one of the
// seed's settings: 40% failures among at least 5 calls within 30 seconds,
// in 10 buckets of 3 seconds.
func ExampleNew_timeWindow() {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{
		Window: breaker.Window{Duration: 30 * time.Second, MinCalls: 5, FailureRatio: 0.4},
		Clock:  clk,
	})
	calls := func(errs ...error) {
		for _, err := range errs {
			done, _ := b.Allow()
			done(err)
		}
	}
	calls(errBackend, errBackend, nil)
	clk.Advance(31 * time.Second) // those three age out
	calls(nil, nil, errBackend, nil)
	fmt.Println(b.Counts().Calls(), "calls in the window:", b.State())
	calls(errBackend) // 2 failures of 5: 40%
	fmt.Println(b.State())
	// Output:
	// 4 calls in the window: closed
	// open
}

// The slow-call condition, as in resilience4j, opens the breaker when too
// many calls are slow even though they succeed: a saturated downstream
// often slows down before it fails.
func ExampleNew_slowCallRate() {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{
		Window: breaker.Window{
			Calls:            4,
			SlowCallDuration: 2 * time.Second,
			SlowCallRatio:    0.5,
		},
		Clock: clk,
	})
	for _, took := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 200 * time.Millisecond, 5 * time.Second} {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (string, error) {
			clk.Advance(took) // the call takes this long
			return "ok", nil
		})
		fmt.Printf("call took %v: %v\n", took, b.State())
	}
	// Output:
	// call took 100ms: closed
	// call took 3s: closed
	// call took 200ms: closed
	// call took 5s: open
}

// ReadyToTrip takes any rule over Counts; with a Window the counts cover
// the window. Here: at least 3 failures and more failures than successes
// among the last 20 calls.
func ExampleNew_readyToTrip() {
	b := breaker.New(breaker.Config{
		Window: breaker.Window{Calls: 20},
		ReadyToTrip: func(c breaker.Counts) bool {
			return c.Failures >= 3 && c.Failures > c.Successes
		},
		Clock: clocktest.NewFake(),
	})
	for _, err := range []error{errBackend, errBackend, nil, errBackend, nil, errBackend} {
		report(b, err)
	}
	// Output:
	// failed   -> closed
	// failed   -> closed
	// ok       -> closed
	// failed   -> open
	// refused: breaker: open
	// refused: breaker: open
}

// With a Probe the breaker checks the downstream itself shortly before the
// open period ends, so no real request is risked on a dead service.
func ExampleNew_activeProbe() {
	clk := clocktest.NewFake()
	healthy := false
	b := breaker.New(breaker.Config{
		ConsecutiveFailures: 1,
		OpenTimeout:         10 * time.Second,
		OpenJitter:          -1,
		Probe: func(ctx context.Context) error {
			fmt.Println("probe at", clk.Since(clocktest.Epoch))
			if !healthy {
				return errBackend
			}
			return nil
		},
		Clock: clk,
	})
	defer b.Close()
	report(b, errBackend)
	clk.Advance(10 * time.Second) // the probe fails: another 10s
	fmt.Println(b.State())
	healthy = true
	clk.Advance(10 * time.Second)
	fmt.Println(b.State())
	// Output:
	// failed   -> open
	// probe at 9.9s
	// open
	// probe at 19.8s
	// half-open
}

// Do wraps one call.
func ExampleDo() {
	b := breaker.New(breaker.Config{})
	body, err := breaker.Do(context.Background(), b, func(ctx context.Context) (string, error) {
		return "hello", nil
	})
	fmt.Println(body, err)
	// Output: hello <nil>
}

// Allow suits transports and interceptors, where the call is not a
// function: ask first, report the result when it is known.
func ExampleBreaker_Allow() {
	b := breaker.New(breaker.Config{})
	done, err := b.Allow()
	if err != nil {
		fmt.Println("fail fast:", err)
		return
	}
	resultErr := error(nil) // ... make the request ...
	done(resultErr)
	fmt.Println(b.Counts().Successes, "success")
	// Output: 1 success
}

// Subscribe feeds state changes to logs or metrics.
func ExampleBreaker_Subscribe() {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenJitter: -1, Clock: clk})
	stop := b.Subscribe(func(from, to breaker.State) { fmt.Println(from, "->", to) })
	defer stop()
	report(b, errBackend)
	clk.Advance(breaker.DefaultOpenTimeout)
	report(b, nil)
	// Output:
	// closed -> open
	// failed   -> open
	// open -> half-open
	// half-open -> closed
	// ok       -> closed
}

// In a retry.Policy the breaker is asked before every attempt; once it is
// open, Do stops at once with breaker.ErrOpen and the last error, without
// waiting or spending retry budget.
func Example_retry() {
	clk := clocktest.NewFake()
	p := &retry.Policy{
		MaxAttempts: 5,
		Backoff:     backoff.Constant{Interval: time.Second},
		Breaker:     breaker.New(breaker.Config{ConsecutiveFailures: 1, Clock: clk}),
		Clock:       clk,
	}
	attempts := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		attempts++
		return 0, errBackend
	})
	fmt.Println(attempts, "attempt;", err)
	fmt.Println(errors.Is(err, breaker.ErrOpen), errors.Is(err, errBackend))
	// Output:
	// 1 attempt; breaker: open after 1 attempts: backend unavailable
	// true true
}
