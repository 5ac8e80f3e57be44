package hedge_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

type marker struct{ _ [64]byte }

type markerKey struct{}

// plainObserver is an Observer, and nothing else, that a pooled call may
// reference.
type plainObserver struct {
	retry.NopObserver
	_ [64]byte
}

// doAndForget runs one call that answers at once and returns weak
// pointers to its caller's context value, Policy and Observer: nothing
// of the test holds them any more.
//
//go:noinline
func doAndForget(observer bool) (wm weak.Pointer[marker], wp weak.Pointer[retry.Policy], wo weak.Pointer[plainObserver]) {
	m := new(marker)
	ctx := context.WithValue(context.Background(), markerKey{}, m)
	p := &retry.Policy{MaxAttempts: 3}
	var o *plainObserver
	if observer {
		o = new(plainObserver)
		p.Observer = o
		wo = weak.Make(o)
	}
	h := &hedge.Hedger{Policy: p, Delay: time.Hour}
	if _, err := hedge.Do(ctx, h, func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
		panic(err)
	}
	return weak.Make(m), weak.Make(p), wo
}

// A pooled call must not keep its caller's Policy alive: a call given
// back dropped only its op and release, so that until its P next called
// Do (never, for a P above a lowered GOMAXPROCS) it held the Policy, and
// more. It is collected by the next garbage collection now.
func TestPooledCallDropsCallersPolicy(t *testing.T) {
	_, wp, _ := doAndForget(false)
	runtime.GC() // one: a sync.Pool keeps its calls through it (its victim cache)
	if wp.Value() != nil {
		t.Error("the Policy is still reachable after a collection")
	}
}

// A call kept in its P's cell was only marked stale by a collection: its
// first-attempt contexts (and their parents, the callers' contexts), its
// retry.Call and its copy of the Policy for an Observer lived on until
// its P next called Do. The cells are emptied by every collection now, so
// the caller's context, Policy and Observer are collected within a few.
func TestPooledCallDropsCallersContext(t *testing.T) {
	for _, observer := range []bool{false, true} {
		wm, wp, wo := doAndForget(observer)
		gone := func() bool {
			return wm.Value() == nil && wp.Value() == nil && (!observer || wo.Value() == nil)
		}
		for i := 0; i < 100 && !gone(); i++ {
			runtime.GC()
			runtime.Gosched() // the sweeper's finalizer runs after a collection, on its own goroutine
		}
		if !gone() {
			t.Errorf("observer %v: the caller's context, Policy or Observer is still reachable after 100 collections", observer)
		}
	}
}
