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
// that P touches, as sync.Pool keeps its per-P private value: no atomic
// operation, about 25 instructions for both. A cell that is empty or full
// (a second call of the same P, nested or interleaved), a P numbered
// cacheCells or more, and the race detector's builds (which cannot see
// that a P's goroutines take turns) use the sync.Pool.
//
// A call in a cell holds what it last held (its Policy and contexts) until
// its P next calls Do: every garbage collection makes the calls then in
// cells stale (cacheGen, bumped by cacheSweeper's finalizer), and a stale
// call is dropped, not used, when its P next takes or gives back a call.
// At most cacheCells calls are ever kept that way.
var (
	pool     = sync.Pool{New: func() any { c := new(call); c.wrap.c = c; return c }}
	cells    [cacheCells]cacheCell
	cacheGen atomic.Uint32
)

const cacheCells = 16

type cacheCell struct {
	c   *call
	gen uint32    // cacheGen when c was put
	_   [116]byte // one cell per cache line (and its pair)
}

// getCall returns a call to set up.
func getCall() *call {
	if !raceBuild {
		id := procPin()
		if uint(id) < cacheCells {
			cl := &cells[id]
			if c := cl.c; c != nil {
				cl.c = nil
				if cl.gen == cacheGen.Load() {
					procUnpin()
					return c
				}
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
			if g := cacheGen.Load(); cl.c == nil || cl.gen != g {
				cl.c, cl.gen = c, g
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

// cacheSweeper marks the cells' calls stale when the garbage collector
// finds it unreachable, once per collection, and makes the next one.
type cacheSweeper struct{ _ [16]byte } // not a tiny allocation: those may never be finalized

func newCacheSweeper() {
	runtime.SetFinalizer(new(cacheSweeper), func(*cacheSweeper) {
		cacheGen.Add(1)
		newCacheSweeper()
	})
}

func init() { newCacheSweeper() }
