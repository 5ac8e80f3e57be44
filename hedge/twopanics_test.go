package hedge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// panicEndObserver panics with "attemptend" in the AttemptEnd of an
// attempt that panicked, after recording it.
type panicEndObserver struct{ events }

func (o *panicEndObserver) AttemptEnd(ctx context.Context, s retry.AttemptEnd) {
	o.events.AttemptEnd(ctx, s)
	var pe *retry.PanicError
	if errors.As(s.Err, &pe) {
		panic("attemptend")
	}
}

// When a hedge panics and the first attempt, cancelled, panics too, Do
// ends the hedge's attempt, then the first's and the call. An Observer
// whose AttemptEnd panicked in the first of those ends unwound Do's
// cleanup: the first attempt was never reported (its breaker permit left
// out), the call never ended for the Observer, and the Observer's panic
// replaced the attempt's. Each end now runs whatever the Observer does.
func TestTwoPanicsObserverPanicEndsEveryAttempt(t *testing.T) {
	clk := clocktest.NewFake()
	br := &errBreaker{}
	o := &panicEndObserver{}
	p := &retry.Policy{MaxAttempts: 3, Clock: clk, Breaker: br, Observer: o}
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	op := func(ctx context.Context) (int, error) {
		if n, _, _ := hedge.AttemptOf(ctx); n > 1 {
			panic("hedge")
		}
		<-ctx.Done() // cancelled when the hedge panics
		panic("inline")
	}
	pan := make(chan any, 1)
	go func() {
		defer func() { pan <- recover() }()
		hedge.Do(context.Background(), h, op, nil)
	}()
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	var r any
	select {
	case r = <-pan:
	case <-time.After(10 * time.Second):
		t.Fatal("Do hangs")
	}
	if r != "inline" {
		t.Fatalf("Do panicked with %v, want the first attempt's %q", r, "inline")
	}
	br.mu.Lock()
	if br.allows != 2 || len(br.dones) != 2 {
		t.Errorf("breaker: %d allowed, %d done; want both attempts' permits back", br.allows, len(br.dones))
	}
	br.mu.Unlock()
	if log := o.String(); strings.Count(log, "callend:panic") != 1 {
		t.Errorf("the Observer heard %s; want the call to end once, with ReasonPanic", log)
	}
}

// When two hedges panic, the second's attempt is ended on its own
// goroutine, under the call's lock. An Observer whose AttemptEnd panicked
// there unwound that goroutine with the lock held: the process crashed
// (a panic on a goroutine of Do's) and the caller would have waited for
// the hedge for ever. The first panic now goes on in the caller's
// goroutine, every permit back.
func TestSecondHedgePanicObserverPanicDoesNotCrash(t *testing.T) {
	clk := clocktest.NewFake()
	br := &errBreaker{}
	o := &panicEndObserver{}
	p := &retry.Policy{MaxAttempts: 5, Clock: clk, Breaker: br, Observer: o}
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 2}
	started := make(chan int, 3)
	op := func(ctx context.Context) (int, error) {
		n, _, _ := hedge.AttemptOf(ctx)
		started <- n
		switch n {
		case 3:
			panic("hedge 3")
		case 2:
			<-ctx.Done() // cancelled when hedge 3 panics
			panic("hedge 2")
		}
		<-ctx.Done()
		return 0, ctx.Err()
	}
	pan := make(chan any, 1)
	go func() {
		defer func() { pan <- recover() }()
		hedge.Do(context.Background(), h, op, nil)
	}()
	for n := 1; n <= 3; n++ {
		if n > 1 {
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
		}
		select {
		case got := <-started:
			if got != n {
				t.Fatalf("attempt %d started, want %d", got, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d did not start", n)
		}
	}
	var r any
	select {
	case r = <-pan:
	case <-time.After(10 * time.Second):
		t.Fatal("Do hangs")
	}
	if r != "hedge 3" {
		t.Fatalf("Do panicked with %v, want the first panic, %q", r, "hedge 3")
	}
	br.mu.Lock()
	if br.allows != 3 || len(br.dones) != 3 {
		t.Errorf("breaker: %d allowed, %d done; want every attempt's permit back", br.allows, len(br.dones))
	}
	br.mu.Unlock()
	if log := o.String(); strings.Count(log, "callend:panic") != 1 {
		t.Errorf("the Observer heard %s; want the call to end once, with ReasonPanic", log)
	}
}
