package otelretry_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// allowOnce is a breaker that lets the first attempt through and refuses
// every later one in Allow, while Ready (asked before the wait) grants:
// the call gives up after its retry was scheduled, when the wait is over.
type allowOnce struct{ n atomic.Int32 }

func (b *allowOnce) Ready() error { return nil }
func (b *allowOnce) Allow() (func(error), error) {
	if b.n.Add(1) > 1 {
		return nil, errOpen
	}
	return func(error) {}, nil
}

// TestRetriesActiveCountsWaitingCalls is the regression test of issue 18
// item 14: calls whose retry is scheduled count in retries.active while
// they wait (backoff on the fake clock), and the gauge returns exactly to
// zero however each call then ends: success, MaxAttempts, a breaker that
// refuses once the wait is over, the caller's context ending during the
// wait, a panic in the retry (through retry.Call, as adapters report it),
// and calls that never retry (permanent error, budget refusal).
func TestRetriesActiveCountsWaitingCalls(t *testing.T) {
	clk := clocktest.NewFake()
	h := newHarness(t, otelretry.Config{})
	c := h.obs
	active := func() float64 { v, _ := h.point(t, "stormguard.retries.active", op("op")); return v }
	policy := func() *retry.Policy {
		return &retry.Policy{
			Operation:   "op",
			MaxAttempts: 2,
			Backoff:     backoff.Constant{Interval: 10 * time.Second},
			Clock:       clk,
			Observer:    c,
		}
	}
	// fail fails every attempt; failThenSucceed only the first.
	fail := func(context.Context) (int, error) { return 0, errTransient }
	n := atomic.Int32{}
	failThenSucceed := func(context.Context) (int, error) {
		if n.Add(1) == 1 {
			return 0, errTransient
		}
		return 1, nil
	}

	var wg sync.WaitGroup
	results := make(map[string]error)
	var mu sync.Mutex
	run := func(name string, f func() error) <-chan struct{} {
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			err := f()
			mu.Lock()
			results[name] = err
			mu.Unlock()
		})
		return done
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run("success", func() error { _, err := retry.Do(context.Background(), policy(), failThenSucceed); return err })
	run("attempts", func() error { _, err := retry.Do(context.Background(), policy(), fail); return err })
	run("breaker", func() error {
		p := policy()
		p.Breaker = &allowOnce{}
		_, err := retry.Do(context.Background(), p, fail)
		return err
	})
	canceled := run("context", func() error { _, err := retry.Do(ctx, policy(), fail); return err })
	panicked := make(chan any, 1)
	run("panic", func() error {
		call := retry.NewCall(context.Background(), policy())
		defer func() { panicked <- recover() }()
		for {
			a, err := call.Begin()
			if err != nil {
				return err
			}
			err = func() error {
				defer func() {
					if v := recover(); v != nil {
						call.Panic(&a, v)
						panic(v)
					}
				}()
				if a.N == 2 {
					panic("boom")
				}
				return errTransient
			}()
			if err = call.End(&a, err); err == nil {
				call.Succeed()
				return nil
			}
			d, err := call.Next(err)
			if err != nil {
				return err
			}
			call.Wait(d)
		}
	})
	const waiting = 5
	clk.BlockUntil(waiting) // every call has failed once and waits for its retry

	// Calls that fail once and do not retry pass through the gauge.
	p := policy()
	if _, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		return 0, retry.Permanent(errTransient)
	}); err == nil {
		t.Fatal("permanent error: no error")
	}
	p.Budget = budgetRefusing{}
	if _, err := retry.Do(context.Background(), p, fail); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("budget refusal: %v", err)
	}
	if got := active(); got != waiting {
		t.Fatalf("retries.active with %d calls waiting for their retry = %v, want %d", waiting, got, waiting)
	}

	cancel() // the "context" call gives up during its wait
	<-canceled
	if got := active(); got != waiting-1 {
		t.Errorf("retries.active after one waiting call was canceled = %v, want %d", got, waiting-1)
	}

	clk.Advance(10 * time.Second) // the waits end: every retry runs or is refused
	wg.Wait()
	if v := <-panicked; v != "boom" {
		t.Errorf("panic value %v, want boom", v)
	}
	for name, want := range map[string]error{
		"success":  nil,
		"attempts": retry.ErrAttemptsExhausted,
		"breaker":  errOpen,
		"context":  context.Canceled,
	} {
		if err := results[name]; want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s call: %v, want %v", name, err, want)
		}
	}
	if got := active(); got != 0 {
		t.Errorf("retries.active after every call ended = %v, want 0", got)
	}
	for reason, want := range map[string]float64{
		"success": 1, "attempts": 1, "breaker": 1, "context": 1, "panic": 1, "permanent": 1, "budget": 1,
	} {
		if got := h.value(t, "stormguard.calls", op("op"), attribute.String("outcome", reason)); got != want {
			t.Errorf("calls{outcome=%q} = %v, want %v", reason, got, want)
		}
	}
}

var errOpen = errors.New("test: breaker open")
