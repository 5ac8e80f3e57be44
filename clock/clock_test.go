package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"go.uber.org/goleak"
)

var errMine = errors.New("mine")

func TestWithTimeoutFake(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second, errMine)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(f.Now().Add(time.Second)) {
		t.Fatalf("deadline = %v, %v", dl, ok)
	}
	f.Advance(999 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("expired early")
	}
	f.Advance(time.Millisecond)
	<-ctx.Done()
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v", ctx.Err())
	}
	if !errors.Is(context.Cause(ctx), errMine) {
		t.Fatalf("Cause = %v", context.Cause(ctx))
	}
}

func TestWithTimeoutFakeCancelledFirst(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second, errMine)
	cancel()
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err = %v", ctx.Err())
	}
	if f.Pending() != 0 {
		t.Fatalf("timer not stopped: %d pending", f.Pending())
	}
}

func TestWithTimeoutFakeParentDeadlineEarlier(t *testing.T) {
	f := clocktest.NewFake()
	pdl := time.Now().Add(time.Hour)
	parent, pc := context.WithDeadline(context.Background(), pdl)
	defer pc()
	ctx, cancel := clock.WithTimeout(parent, f, 24*365*time.Hour*10, nil)
	defer cancel()
	if dl, _ := ctx.Deadline(); !dl.Equal(pdl) {
		t.Fatalf("deadline = %v, want parent's %v", dl, pdl)
	}
}

func TestWithTimeoutReal(t *testing.T) {
	ctx, cancel := clock.WithTimeout(context.Background(), nil, time.Nanosecond, errMine)
	defer cancel()
	<-ctx.Done()
	if ctx.Err() != context.DeadlineExceeded || !errors.Is(context.Cause(ctx), errMine) {
		t.Fatalf("Err = %v Cause = %v", ctx.Err(), context.Cause(ctx))
	}
}

func TestRealClock(t *testing.T) {
	c := clock.Or(nil)
	if c != clock.Real {
		t.Fatal("Or(nil) is not Real")
	}
	t0 := c.Now()
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if c.Since(t0) < time.Millisecond {
		t.Fatal("timer fired early")
	}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
	<-clock.After(c, 0)
}

// panicAfterFunc is a Clock whose AfterFunc panics.
type panicAfterFunc struct{ clock.Clock }

func (panicAfterFunc) AfterFunc(time.Duration, func()) clock.Timer { panic("AfterFunc") }

// ownDone is a parent context of a type the context package does not
// know, with a Done channel of its own: a child registers with it by a
// goroutine that waits for the parent or the child to end.
type ownDone struct {
	context.Context
	done chan struct{}
}

func (o ownDone) Done() <-chan struct{} { return o.done }
func (o ownDone) Err() error {
	select {
	case <-o.done:
		return context.Canceled
	default:
		return nil
	}
}

// A Clock whose AfterFunc panics in WithTimeout leaves nothing registered
// with the parent: the context made so far is ended (here, the goroutine
// the context package started to watch the parent for it ends), and the
// panic goes on.
func TestWithTimeoutAfterFuncPanicLeavesNothingOnTheParent(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	parent := ownDone{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	func() {
		defer func() {
			if r := recover(); r != "AfterFunc" {
				t.Errorf("recovered %v, want the Clock's panic", r)
			}
		}()
		clock.WithTimeout(parent, panicAfterFunc{clocktest.NewFake()}, time.Second, nil)
	}()
	goleak.VerifyNone(t, opts) // before the parent ends
}
