package hedge

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/internal/stripe"
)

// Pooled calls.
//
// A call is taken at the start of every Do and given back at its end. A
// sync.Pool's Get and Put cost about 115 instructions together (each pins
// the P, finds its local pool and unpins), more than a tenth of a call
// that answers before its hedge delay. So each call first tries one cell
// of callCache: the cell of the P it runs on (stripe.Hint), taken with one
// atomic swap, and given back, to the same cell, with one
// compare-and-swap. Calls running in parallel use distinct cells (at most
// GOMAXPROCS run at once); a cell that is empty or full (a second call of
// the same P, nested or interleaved) falls back to the sync.Pool. Like the
// sync.Pool, the cells hold nothing past a garbage collection: every
// collection empties them (cacheSweeper), so a call given back keeps
// what it last held (one context and Policy) at most until then.
var (
	callCache [stripe.N]cacheCell
	pool      = sync.Pool{New: func() any { c := new(call); c.wrap.c = c; return c }}
)

type cacheCell struct {
	c atomic.Pointer[call]
	_ [120]byte // one cell per cache line (and its pair)
}

// getCall returns a call to set up.
func getCall() *call {
	i := stripe.Hint()
	c := callCache[i].c.Swap(nil)
	if c == nil {
		c = pool.Get().(*call)
	}
	c.home = i
	return c
}

// putCall gives c back: to the cell it came from, or to the sync.Pool.
func putCall(c *call) {
	if !callCache[c.home].c.CompareAndSwap(nil, c) {
		pool.Put(c)
	}
}

// cacheSweeper empties callCache when the garbage collector finds it
// unreachable, once per collection, and makes the next one.
type cacheSweeper struct{ _ [16]byte } // not a tiny allocation: those may never be finalized

func sweepCallCache() {
	runtime.SetFinalizer(new(cacheSweeper), func(*cacheSweeper) {
		for i := range callCache {
			callCache[i].c.Store(nil)
		}
		sweepCallCache()
	})
}

func init() { sweepCallCache() }
