package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// clockMode runs one test body on the real clock and on a fake one, so
// that code under the fake clock sees what it would see under the real.
type clockMode struct {
	name string
	new  func() (clock.Clock, func(time.Duration)) // the clock and how to let time pass
}

var clockModes = []clockMode{
	{"real", func() (clock.Clock, func(time.Duration)) {
		return clock.Real, func(d time.Duration) { time.Sleep(d) }
	}},
	{"fake", func() (clock.Clock, func(time.Duration)) {
		f := clocktest.NewFake()
		return f, f.Advance
	}},
}

func runModes(t *testing.T, body func(t *testing.T, c clock.Clock, pass func(time.Duration))) {
	for _, m := range clockModes {
		t.Run(m.name, func(t *testing.T) {
			c, pass := m.new()
			body(t, c, pass)
		})
	}
}

const (
	short = 2 * time.Millisecond
	long  = time.Hour
)

// sliceErr is an error type that cannot be compared with ==.
type sliceErr []string

func (s sliceErr) Error() string { return "slice error" }

func wantEnd(t *testing.T, name string, ctx context.Context, err, cause error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not done", name)
	}
	if got := ctx.Err(); got != err {
		t.Errorf("%s: Err = %v, want %v", name, got, err)
	}
	if got := context.Cause(ctx); !errors.Is(got, cause) {
		t.Errorf("%s: Cause = %v, want %v", name, got, cause)
	}
}

func TestWithTimeoutChildrenInherit(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		ctx, cancel := clock.WithTimeout(context.Background(), c, short, errMine)
		defer cancel()
		child, cc := context.WithCancel(ctx)
		defer cc()
		causeChild, ccc := context.WithCancelCause(ctx)
		defer ccc(nil)
		nested, nc := clock.WithTimeout(ctx, c, long, errors.New("nested"))
		defer nc()
		grandchild, gc := context.WithCancel(nested)
		defer gc()
		afterRan := make(chan struct{})
		context.AfterFunc(child, func() { close(afterRan) })
		pass(short)
		wantEnd(t, "timeout", ctx, context.DeadlineExceeded, errMine)
		wantEnd(t, "WithCancel child", child, context.DeadlineExceeded, errMine)
		wantEnd(t, "WithCancelCause child", causeChild, context.DeadlineExceeded, errMine)
		wantEnd(t, "nested longer timeout", nested, context.DeadlineExceeded, errMine)
		wantEnd(t, "child of nested", grandchild, context.DeadlineExceeded, errMine)
		<-afterRan
	})
}

func TestWithTimeoutNestedShorterFiresAlone(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		errInner := errors.New("inner")
		outer, oc := clock.WithTimeout(context.Background(), c, long, errMine)
		defer oc()
		inner, ic := clock.WithTimeout(outer, c, short, errInner)
		defer ic()
		child, cc := context.WithCancel(inner)
		defer cc()
		pass(short)
		wantEnd(t, "inner", inner, context.DeadlineExceeded, errInner)
		wantEnd(t, "child of inner", child, context.DeadlineExceeded, errInner)
		if outer.Err() != nil {
			t.Fatalf("outer ended: %v", outer.Err())
		}
	})
}

func TestWithTimeoutParentCancelCause(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		errParent := errors.New("parent's cause")
		parent, pcancel := context.WithCancelCause(context.Background())
		ctx, cancel := clock.WithTimeout(parent, c, long, errMine)
		defer cancel()
		child, cc := context.WithCancel(ctx)
		defer cc()
		pcancel(errParent)
		wantEnd(t, "timeout", ctx, context.Canceled, errParent)
		wantEnd(t, "child", child, context.Canceled, errParent)
	})
}

func TestWithTimeoutParentDone(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		parent, pcancel := context.WithCancel(context.Background())
		pcancel()
		ctx, cancel := clock.WithTimeout(parent, c, long, errMine)
		defer cancel()
		if ctx.Err() != context.Canceled { // at once, as context.WithTimeout
			t.Fatalf("Err = %v right after WithTimeout of a done parent", ctx.Err())
		}
	})
}

func TestWithTimeoutCancel(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		ctx, cancel := clock.WithTimeout(context.Background(), c, long, errMine)
		child, cc := context.WithCancel(ctx)
		defer cc()
		cancel()
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err = %v right after cancel", ctx.Err())
		}
		wantEnd(t, "timeout", ctx, context.Canceled, context.Canceled)
		wantEnd(t, "child", child, context.Canceled, context.Canceled)
		pass(short)
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err = %v after the deadline", ctx.Err())
		}
	})
}

func TestWithTimeoutNonComparableCause(t *testing.T) {
	runModes(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		cause := sliceErr{"a", "b"}
		ctx, cancel := clock.WithTimeout(context.Background(), c, short, cause)
		defer cancel()
		child, cc := context.WithCancel(ctx)
		defer cc()
		pass(short)
		<-child.Done()
		if ctx.Err() != context.DeadlineExceeded || child.Err() != context.DeadlineExceeded {
			t.Fatalf("Err = %v, child %v", ctx.Err(), child.Err())
		}
		if _, ok := context.Cause(child).(sliceErr); !ok {
			t.Fatalf("Cause = %v", context.Cause(child))
		}
	})
}
