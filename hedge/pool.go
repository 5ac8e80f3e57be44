package hedge

import (
	"runtime"
	"sync"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// Pooled calls.
//
// A call is taken at the start of every Do and given back at its end. A
// sync.Pool's Get and Put cost about 105 instructions together, about a
// tenth of a call that answers before its hedge delay. So each P (the
// runtime's processor; at most GOMAXPROCS goroutines run at once, one per
// P) keeps one call of its own in a cell that only a goroutine pinned to
// that P takes and gives back, as sync.Pool keeps its per-P private
// value: no atomic write, about 30 instructions each (procPin and
// procUnpin included). A cell that is
// empty or busy (a second call of the same P, nested or interleaved), a P
// numbered cacheCells or more, and the race detector's builds (which
// cannot see that a P's goroutines take turns) use the sync.Pool.
//
// A call given back (put) keeps these references to its caller's world:
// its slab of first-attempt contexts (ctx.go), whose contexts handed out
// so far still hold their parents (the caller's contexts of up to
// ctxSlab-1 earlier rounds and of the last one: a context an operation
// kept must keep working); and, when a call with an Observer, a Policy's
// Clock, MaxElapsed, a group, Adaptives or a retry used them, the
// retry.Call (that call's context, Policy, Clock, Observer and budgets)
// and the copy of the Policy made for an Observer, which the next call
// that uses them overwrites. (It keeps its own state too: on the real
// clock, its entry of a shared timer shard, which the shard keeps parked
// for a few ticks after the call: timers.go.) put drops the rest: the
// caller's context and Policy, the Observer and Breaker wrappers' inner
// ones, a Policy's Clock and its timer, the Adaptive, op and release, the
// results of a hedged round, and the last retry.Attempt. Calls in cells
// are dropped at every garbage collection (cacheSweeper's finalizer,
// which runs after each, empties the cells; a call in use then refills
// its cell when given back), and a sync.Pool drops its values within
// two: so what a call given back for the last time keeps is kept until
// the next collection or the one after, in the cell of a P that calls Do
// no more (one above a lowered GOMAXPROCS) too. At most cacheCells calls
// are kept in cells. A call that a panic ended is not given back: discard
// (call.go) drops it from the cell that holds it, which keeps the next
// call given back on its P.
var (
	pool  = sync.Pool{New: func() any { c := new(call); c.wrap.c = c; return c }}
	cells [cacheCells]cacheCell
)

const cacheCells = 16

// cacheCell is a P's call. Its call stays in it, taken (busy) and given
// back without a pointer write: only cacheSweeper's finalizer, on another
// goroutine, empties it (an atomic store, as the refill after that is),
// and only a goroutine pinned to the P touches busy.
type cacheCell struct {
	c    atomic.Pointer[call]
	busy bool      // c is in use
	_    [119]byte // one cell per cache line (and its pair)
}

// getCall returns a call to set up. (do has a copy of it inline, and of
// putCall's path for a call that goes back to its P's cell.)
func getCall() *call {
	if !raceBuild {
		id := procPin()
		if uint(id) < cacheCells {
			cl := &cells[id]
			if c := cl.c.Load(); c != nil && !cl.busy {
				cl.busy = true
				procUnpin()
				return c
			}
		}
		procUnpin()
	}
	return pool.Get().(*call)
}

// putCall gives c back: to its P's cell, or to the sync.Pool.
func putCall(c *call) {
	if !raceBuild {
		id := procPin()
		if uint(id) < cacheCells {
			cl := &cells[id]
			switch cl.c.Load() {
			case c: // the cell's own
				cl.busy = false
				procUnpin()
				return
			case nil:
				// Emptied by a collection (its call, if one was in
				// use, goes to the sync.Pool when given back): c
				// is the cell's call from now.
				cl.c.Store(c)
				cl.busy = false
				procUnpin()
				return
			}
		}
		procUnpin()
	}
	pool.Put(c)
}

// procPin pins the calling goroutine to its P, and returns the P's number,
// as sync.Pool does: runtime.procPin is kept callable by linkname
// (go.dev/issue/67401, "Do not remove or change the type signature"), as
// internal/stripe uses it.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// cacheSweeper empties the cells when the garbage collector finds it
// unreachable, once per collection, and makes the next one: the calls in
// them are then the collector's.
type cacheSweeper struct{ _ [16]byte } // not a tiny allocation: those may never be finalized

func newCacheSweeper() {
	runtime.SetFinalizer(new(cacheSweeper), func(*cacheSweeper) {
		for i := range cells {
			cells[i].c.Store(nil)
		}
		newCacheSweeper()
	})
}

func init() { newCacheSweeper() }
