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

// A pooled call must not keep its caller's Policy and Observer alive: a
// call given back dropped only its op and release, so that until its P
// next called Do (never, for a P above a lowered GOMAXPROCS) it held the
// Policy, its copy with the Observer, and more. They are collected by the
// next garbage collection now.
func TestPooledCallDropsCallersPolicy(t *testing.T) {
	for _, observer := range []bool{false, true} {
		_, wp, wo := doAndForget(observer)
		runtime.GC() // one: a sync.Pool keeps its calls through it (its victim cache)
		if wp.Value() != nil {
			t.Errorf("observer %v: the Policy is still reachable after a collection", observer)
		}
		if observer && wo.Value() != nil {
			t.Errorf("the Observer is still reachable after a collection")
		}
	}
}

// A call kept in its P's cell was only marked stale by a collection: its
// first-attempt contexts (and their parents, the callers' contexts) lived
// on until its P next called Do. The cells are emptied by every
// collection now, so the caller's context is collected within a few.
func TestPooledCallDropsCallersContext(t *testing.T) {
	wm, _, _ := doAndForget(false)
	for i := 0; i < 100 && wm.Value() != nil; i++ {
		runtime.GC()
		runtime.Gosched() // the sweeper's finalizer runs after a collection, on its own goroutine
	}
	if wm.Value() != nil {
		t.Fatal("the caller's context is still reachable after 100 collections")
	}
}
