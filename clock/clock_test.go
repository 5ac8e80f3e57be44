package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
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
