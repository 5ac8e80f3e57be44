package hedge

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// attemptCtx is the context one attempt runs with: its parent's, plus a
// cancellation of its own that Do uses to stop a loser. It is built so that
// an attempt that never watches Done costs one small allocation: the
// channel, and the registration with the parent that a Done channel needs,
// are made by a real context.WithCancel the first time Done is called
// (materialize). After that, Value reaches the real context, so the context
// package attaches children to it directly, without a goroutine.
type attemptCtx struct {
	// 32 bytes: first-attempt contexts come in slabs (inlineCtx), and
	// every byte is one per call. The lock is a bit of state (lock).
	parent context.Context
	real   atomic.Pointer[realCtx]
	state  atomic.Uint32 // live or how it ended (what Err reports), | busy while locked
	meta   uint32        // the attempt's number in the call << 1, | 1 for a hedge
}

// The states of an attemptCtx. Once it has left live it never changes,
// and what Err reports follows from it.
const (
	live      = iota
	ctxCancel // cancelled by Do: context.Canceled
	ctxParent // its parent had ended first: the parent's error
	ctxReal   // materialized, then cancelled: the real context's error

	busy = 4 // cancel or materialize holds the context
)

// lock sets busy, waiting while another holder has it (cancel and
// materialize both hold it for a few instructions, and rarely meet), and
// returns the state under it; unlock with c.state.Store(state).
func (c *attemptCtx) lock() uint32 {
	for {
		if s := c.state.Load(); s&busy == 0 && c.state.CompareAndSwap(s, s|busy) {
			return s
		}
		runtime.Gosched()
	}
}

// pack gives attemptCtx.meta (attempt numbers above 2^31-1 are clamped).
func pack(n int, hedge bool) uint32 {
	m := uint32(min(max(n, 0), 1<<31-1)) << 1
	if hedge {
		m |= 1
	}
	return m
}

type realCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAttemptCtx(parent context.Context, n int, hedge bool) *attemptCtx {
	return &attemptCtx{parent: parent, meta: pack(n, hedge)}
}

// ctxSlab is how many first-attempt contexts a pooled call allocates at
// once. Each context is handed out once and never reused (an operation may
// keep its context after it returned, and must find it ended), so the
// slab is an allocation amortized over ctxSlab calls rather than one per
// call; it stays alive while any of its contexts is reachable.
const ctxSlab = 64 // 64 × 32 B = 2048 B, a size class of its own

// inlineCtx returns a fresh context for the first attempt of a round, cut
// from c's slab.
func (c *call) inlineCtx(parent context.Context, n int) *attemptCtx {
	if c.slabN >= len(c.slab) {
		c.slab, c.slabN = make([]attemptCtx, ctxSlab), 0
	}
	x := &c.slab[c.slabN]
	c.slabN++
	x.parent, x.meta = parent, pack(n, false)
	return x
}

type attemptKey struct{}

// AttemptOf reports, for a context Do gave an attempt (or one derived
// from it), the attempt's number in the call (1 for the first; hedges and
// retries count alike) and whether it was started as a hedge; ok is false
// for any other context. Adapters use it for what they announce: gRPC's
// grpc-previous-rpc-attempts is n-1, the Stormguard-Attempt header n.
func AttemptOf(ctx context.Context) (n int, hedge, ok bool) {
	if c, is := ctx.Value(attemptKey{}).(*attemptCtx); is {
		return int(c.meta >> 1), c.meta&1 == 1, true
	}
	return 0, false, false
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *attemptCtx) Value(key any) any {
	if _, is := key.(attemptKey); is {
		return c
	}
	if r := c.real.Load(); r != nil {
		return r.ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *attemptCtx) Done() <-chan struct{} {
	if r := c.real.Load(); r != nil {
		return r.ctx.Done()
	}
	return c.materialize().ctx.Done()
}

// materialize gives the context its real context.WithCancel, once; a
// context that has ended gets its real one cancelled before anyone
// receives it. A parent whose Done or Value panics in WithCancel leaves
// the context as it was, unlocked, and the panic goes on.
func (c *attemptCtx) materialize() *realCtx {
	st := c.lock()
	defer c.state.Store(st)
	r := c.real.Load()
	if r == nil {
		ctx, cancel := context.WithCancel(c.parent)
		r = &realCtx{ctx, cancel}
		if st != live {
			cancel()
		}
		c.real.Store(r)
	}
	return r
}

// Err reports the error the context ended with. Once it has reported one,
// it keeps reporting the same: the state is written once, and the error
// each state names cannot change after it is set.
func (c *attemptCtx) Err() error {
	switch c.state.Load() &^ busy {
	case ctxCancel:
		return context.Canceled
	case ctxParent:
		return c.parent.Err()
	case ctxReal:
		return c.real.Load().ctx.Err()
	}
	if r := c.real.Load(); r != nil {
		return r.ctx.Err()
	}
	return c.parent.Err()
}

// cancel ends the context with context.Canceled, unless it had ended
// already (the parent's end is then kept). It costs one compare-and-swap
// when the context was never materialized and its parent has not ended.
// A context that has ended is left as it is, its parent not asked. A
// parent whose Err panics leaves a live context as it was, live and
// unlocked, and the panic goes on: a caller that must see it end uses
// cancelSafe or cancelQuiet (do's guard and the cleanups after a panic
// do). Past that first check (cancelSlow), a parent whose Err, Done or
// Value panics ends it all the same.
func (c *attemptCtx) cancel() {
	if st := c.state.Load(); st != live && st&busy == 0 {
		return // ended: its end never changes, and the parent is not asked
	}
	if c.real.Load() == nil && c.parent.Err() == nil && c.state.CompareAndSwap(live, ctxCancel) {
		// From here materialize cancels the real context it makes; one
		// made between the Load and the swap is cancelled here. Err
		// says context.Canceled either way.
		if r := c.real.Load(); r != nil {
			r.cancel()
		}
		return
	}
	c.cancelSlow()
}

// cancelSlow is cancel with the context locked: its end is stored
// whatever the parent does, context.Canceled when the parent's Err
// panics.
func (c *attemptCtx) cancelSlow() {
	if !c.state.CompareAndSwap(live, busy) {
		if st := c.lock(); st != live {
			c.state.Store(st)
			return
		}
	}
	st := uint32(ctxCancel)
	defer func() { c.state.Store(st) }()
	switch r := c.real.Load(); {
	case r != nil:
		// The real context's error is set before its cancel calls
		// the parent's Done and Value (which may panic).
		st = ctxReal
		r.cancel()
	case c.parent.Err() != nil:
		st = ctxParent
	}
}

// cancelBroken ends the context whose cancel a panic of its parent's
// unwound: with context.Canceled, or its real context's error, without
// asking the parent again. A context that had ended keeps its end.
func (c *attemptCtx) cancelBroken() {
	if !c.state.CompareAndSwap(live, busy) {
		if st := c.lock(); st != live {
			c.state.Store(st)
			return
		}
	}
	st := uint32(ctxCancel)
	defer func() { c.state.Store(st) }()
	if r := c.real.Load(); r != nil {
		st = ctxReal
		r.cancel() // a second call, after one that panicked, finds it cancelled
	}
}

// cancelSafe is cancel for a caller with no cleanup after it: the
// context ends whatever its parent does, and a panic of the parent's goes
// on.
func (c *attemptCtx) cancelSafe() {
	ok := false
	defer func() {
		if !ok {
			c.cancelBroken()
		}
	}()
	c.cancel()
	ok = true
}

// cancelQuiet is cancel for a cleanup that must go on: the context ends
// either way, and a panic of its parent's is returned, not raised (a
// second one, as cancelBroken cancels a real context made meanwhile, is
// dropped).
func (c *attemptCtx) cancelQuiet() (r any) {
	ok := false
	defer func() {
		if !ok {
			r = recover()
			c.cancelDropping()
		}
	}()
	c.cancel()
	ok = true
	return nil
}

// cancelDropping is cancelBroken, its panic dropped.
func (c *attemptCtx) cancelDropping() {
	defer func() { _ = recover() }()
	c.cancelBroken()
}

func (c *attemptCtx) String() string { return "hedge.attempt" }
