package breaker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// Regression tests for issue #17 (core hardening) in package breaker.

// mustPanic runs fn and returns what it panicked with; it fails the test
// if fn returns normally.
func mustPanic(t *testing.T, fn func()) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	fn()
	t.Fatal("no panic")
	return nil
}

// A listener that panics must not keep an actively probed breaker open
// for good: the probe timer is started before the listeners run. Later
// listeners still hear that change, and every listener hears later ones.
func TestPanickingListenerKeepsProbing(t *testing.T) {
	p := &prober{}
	b, fc := newProbed(t, Config{OpenTimeout: 10 * time.Second}, p)
	b.Subscribe(func(from, to State) {
		if to == Open {
			panic("listener failed")
		}
	})
	var r recorder
	b.Subscribe(r.listen)

	if v := mustPanic(t, func() { try(t, b, errDown) }); v != "listener failed" {
		t.Fatalf("panic %v, want the listener's", v)
	}
	wantState(t, b, Open)
	if got := fc.Deadlines(); len(got) != 1 {
		t.Fatalf("pending timers %v, want the probe timer", got)
	}
	fc.Advance(10 * time.Second)
	if len(p.calls) != 1 {
		t.Fatalf("%d probes ran, want 1", len(p.calls))
	}
	wantState(t, b, HalfOpen)
	if got := fmt.Sprint(r.got); got != "[closed->open open->half-open]" {
		t.Fatalf("the second listener heard %v", got)
	}
}

// A listener that panics in a breaker without Probe: the state is settled,
// the other listeners hear the change, and the next change is delivered.
func TestPanickingListenerDoesNotStopOthers(t *testing.T) {
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second})
	var r recorder
	b.Subscribe(func(from, to State) { panic(fmt.Sprint(from, "->", to)) })
	b.Subscribe(r.listen)
	mustPanic(t, func() { try(t, b, errDown) })
	wantState(t, b, Open)
	fc.Advance(time.Second)
	mustPanic(t, func() { b.State() })
	mustPanic(t, func() { mustCall(t, b, nil) })
	wantState(t, b, Closed)
	if got := fmt.Sprint(r.got); got != "[closed->open open->half-open half-open->closed]" {
		t.Fatalf("the second listener heard %v", got)
	}
}

// Close called from a listener that hears the change made by the active
// probe must not deadlock (the probe goroutine used to deliver before it
// left the group Close waits for).
func TestCloseFromListener(t *testing.T) {
	// Made by hand, without newTest's cleanup: a Close that hangs must not
	// hang the cleanup too.
	fc := clocktest.NewFake()
	p := &prober{fc: fc}
	b := New(Config{Clock: fc, OpenJitter: -1, ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second, Probe: p.probe})
	b.Subscribe(func(from, to State) {
		if from == Open && to == HalfOpen {
			b.Close()
		}
	})
	mustCall(t, b, errDown)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		fc.Advance(10 * time.Second) // runs the probe in this goroutine
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second): // a deadlock detector, not a wait for the clock
		t.Fatal("Close called from a listener deadlocked")
	}
	wantState(t, b, HalfOpen)
	if len(p.calls) != 1 {
		t.Fatalf("%d probes ran, want 1", len(p.calls))
	}
	// After Close the breaker works without probing.
	mustCall(t, b, errDown)
	wantState(t, b, Open)
	if n := fc.Pending(); n != 0 {
		t.Fatalf("%d timers pending after Close, want 0", n)
	}
}

// A success racing with a failure must still end the run of failures.
// The sequence F, {S ‖ F}, F, S has at most two failures in a row in
// every interleaving, so with ConsecutiveFailures 3 it must never trip.
// The rounds run back to back on one breaker (each ends with a success).
func TestConsecutiveSuccessIsNeverLost(t *testing.T) {
	defer runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	const rounds = 200_000
	limit := time.Now().Add(2 * time.Second) // bounds the test on a busy machine
	b, _ := newTest(t, Config{ConsecutiveFailures: 3})

	var round, finished atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	worker := func(err error, delay bool) {
		defer wg.Done()
		for r := int64(1); ; r++ {
			for spins := 0; round.Load() < r; spins++ {
				if stop.Load() {
					return
				}
				if spins%64 == 63 {
					runtime.Gosched()
				}
			}
			if delay { // vary which call goes first
				for i := 0; i < int(r%32); i++ {
					runtime.KeepAlive(i)
				}
			}
			done, aerr := b.Allow()
			if aerr != nil {
				finished.Add(1)
				continue
			}
			done(err)
			finished.Add(1)
		}
	}
	wg.Add(2)
	go worker(nil, true)
	go worker(errDown, false)
	defer func() { stop.Store(true); wg.Wait() }()

	var r int64
	for r = 1; r <= rounds && time.Now().Before(limit); r++ {
		mustCall(t, b, errDown)
		round.Store(r)
		for spins := 0; finished.Load() < 2*r; spins++ {
			if spins%64 == 63 {
				runtime.Gosched()
			}
		}
		if b.State() != Closed {
			t.Fatalf("round %d: the breaker opened on F {S ‖ F}: %v", r, b.Counts())
		}
		mustCall(t, b, errDown)
		if b.State() != Closed {
			t.Fatalf("round %d: the breaker opened on F {S ‖ F} F: a success was lost", r)
		}
		mustCall(t, b, nil)
	}
	t.Logf("%d rounds", r-1)
}

// A panic in the function Do runs counts as a failure, whatever
// IsFailure says, releases a half-open probe slot and goes on.
func TestDoPanicCountsAsFailure(t *testing.T) {
	never := func(error) bool { return false } // no error is a failure
	t.Run("closed", func(t *testing.T) {
		b, _ := newTest(t, Config{ConsecutiveFailures: 1, IsFailure: never})
		v := mustPanic(t, func() {
			Do(context.Background(), b, func(context.Context) (int, error) { panic("fn failed") })
		})
		if v != "fn failed" {
			t.Fatalf("panic %v, want fn's", v)
		}
		wantState(t, b, Open)
	})
	t.Run("half-open", func(t *testing.T) {
		b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, IsFailure: never})
		b.trip(b.cur.Load())
		fc.Advance(time.Second)
		wantState(t, b, HalfOpen)
		mustPanic(t, func() {
			Do(context.Background(), b, func(context.Context) (int, error) { panic("fn failed") })
		})
		wantState(t, b, Open) // the slot was released as a failure
		fc.Advance(time.Second)
		mustCall(t, b, nil)
		wantState(t, b, Closed)
	})
	t.Run("retry.PanicError", func(t *testing.T) {
		b, _ := newTest(t, Config{ConsecutiveFailures: 1, IsFailure: never, IsExcluded: func(error) bool { return true }})
		mustCall(t, b, &retry.PanicError{Value: "attempt failed"})
		wantState(t, b, Open)
	})
}

// A probe function that panics counts as a failed probe: the open period
// restarts and the next probe is scheduled, then the panic goes on.
func TestProbePanic(t *testing.T) {
	var calls int
	b, fc := newTest(t, Config{
		ConsecutiveFailures: 1,
		OpenTimeout:         10 * time.Second,
		Probe: func(context.Context) error {
			if calls++; calls == 1 {
				panic("probe failed")
			}
			return nil
		},
	})
	gen := b.Generation()
	mustCall(t, b, errDown)
	if v := mustPanic(t, func() { fc.Advance(10 * time.Second) }); v != "probe failed" {
		t.Fatalf("panic %v, want the probe's", v)
	}
	wantState(t, b, Open)
	if g := b.Generation(); g != gen+2 {
		t.Fatalf("generation %d, want %d: the open period did not restart", g, gen+2)
	}
	if got := fc.Deadlines(); len(got) != 1 {
		t.Fatalf("pending timers %v, want the next probe", got)
	}
	fc.Advance(20 * time.Second)
	if calls != 2 {
		t.Fatalf("%d probes ran, want 2", calls)
	}
	wantState(t, b, HalfOpen)
	b.Close() // must not wait for the panicked probe
}

// A panicking IsFailure on a probe call's result must not keep the probe
// slot: the call counts as failed.
func TestIsFailurePanicReleasesProbeSlot(t *testing.T) {
	errOdd := errors.New("odd")
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, IsFailure: func(err error) bool {
		if err == errOdd {
			panic("IsFailure failed")
		}
		return true
	}})
	mustCall(t, b, errDown)
	fc.Advance(time.Second)
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	mustPanic(t, func() { done(errOdd) })
	wantState(t, b, Open)
	fc.Advance(time.Second)
	mustCall(t, b, nil) // the only slot is free again
	wantState(t, b, Closed)
}

// Every refusal matches ErrOpen; ErrTooManyProbes stays distinguishable;
// refusals do not allocate.
func TestRefusalsMatchErrOpen(t *testing.T) {
	if !errors.Is(ErrTooManyProbes, ErrOpen) {
		t.Error("errors.Is(ErrTooManyProbes, ErrOpen) = false")
	}
	if errors.Is(ErrOpen, ErrTooManyProbes) {
		t.Error("errors.Is(ErrOpen, ErrTooManyProbes) = true")
	}
	if !errors.Is(ErrOpen, ErrOpen) || !errors.Is(ErrTooManyProbes, ErrTooManyProbes) {
		t.Error("a refusal does not match itself")
	}
	if errors.Is(ErrOpen, ErrProbeTimeout) || errors.Is(ErrTooManyProbes, ErrProbeTimeout) {
		t.Error("a refusal matches ErrProbeTimeout")
	}
	if ErrOpen.Error() != "breaker: open" || ErrTooManyProbes.Error() != "breaker: too many probes" {
		t.Errorf("messages %q, %q", ErrOpen, ErrTooManyProbes)
	}

	b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second})
	mustCall(t, b, errDown)
	if _, err := b.Allow(); err != ErrOpen || b.Ready() != ErrOpen {
		t.Fatalf("open: Allow = %v, Ready = %v", err, b.Ready())
	}
	if n := testing.AllocsPerRun(100, func() { b.Allow() }); n != 0 {
		t.Errorf("Allow on an open breaker: %v allocs, want 0", n)
	}
	fc.Advance(time.Second)
	done, _ := b.Allow()
	_, err := b.Allow()
	if !errors.Is(err, ErrOpen) || !errors.Is(err, ErrTooManyProbes) || err != ErrTooManyProbes {
		t.Fatalf("half-open, probe in flight: Allow = %v, want ErrTooManyProbes matching ErrOpen", err)
	}
	if _, err := Do(context.Background(), b, benchOp); !errors.Is(err, ErrOpen) {
		t.Fatalf("Do = %v, want a match for ErrOpen", err)
	}
	if n := testing.AllocsPerRun(100, func() { b.Allow(); b.Ready() }); n != 0 {
		t.Errorf("refusal of a half-open breaker: %v allocs, want 0", n)
	}
	done(nil)
}

// One Config, and its Rand, shared by many breakers that trip at once:
// no data race, even with a source that is not safe for concurrent use.
func TestSharedRandIsSafe(t *testing.T) {
	cfg := Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Rand: rand.NewPCG(1, 2)}
	const goroutines, trips = 16, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			fc := clocktest.NewFake()
			c.Clock = fc
			b := New(c)
			for range trips {
				if err := try(t, b, errDown); err != nil {
					t.Errorf("Allow: %v", err)
					return
				}
				if b.State() != Open {
					t.Error("did not open")
					return
				}
				fc.Advance(time.Second)
				try(t, b, nil) // the probe closes it again
			}
		}()
	}
	wg.Wait()
}

// Validate names the field, the value and the unit of a share.
func TestValidateRatioMessages(t *testing.T) {
	for _, tc := range []struct {
		w    Window
		want string
	}{
		{Window{Calls: 10, FailureRatio: 50}, "breaker: Window.FailureRatio is 50, want a fraction from 0 to 1 (0.5 is 50%)"},
		{Window{Calls: 10, FailureRatio: -0.1}, "breaker: Window.FailureRatio is -0.1, want a fraction from 0 to 1 (0.5 is 50%)"},
		{Window{Calls: 10, SlowCallDuration: time.Second, SlowCallRatio: 80}, "breaker: Window.SlowCallRatio is 80, want a fraction from 0 to 1 (0.5 is 50%)"},
	} {
		err := Config{Window: tc.w}.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%+v) = %v, want %q", tc.w, err, tc.want)
		}
	}
	for _, r := range []float64{0, 0.25, 1} {
		if err := (Config{Window: Window{Calls: 10, FailureRatio: r}}).Validate(); err != nil {
			t.Errorf("FailureRatio %v: %v", r, err)
		}
	}
	if err := (Config{OpenJitter: 10}).Validate(); err == nil || !strings.Contains(err.Error(), "OpenJitter is 10, want a fraction") {
		t.Errorf("OpenJitter 10: %v", err)
	}
}
