package hedge

import (
	"context"
	"sync"
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
	// Fields are ordered to keep it at 56 bytes: first-attempt contexts
	// come in slabs (inlineCtx), and every byte is one per call.
	parent context.Context
	real   atomic.Pointer[realCtx]
	err    error // what Err reports once ended, written before ended is set
	mu     sync.Mutex
	ended  atomic.Bool // err is set
	meta   uint32      // the attempt's number in the call << 1, | 1 for a hedge
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
const ctxSlab = 36 // 36 × 56 B = 2016 B, in the 2048 B size class

// inlineCtx returns a fresh context for the first attempt of a round, cut
// from c's slab.
func (c *call) inlineCtx(parent context.Context, n int) *attemptCtx {
	if len(c.slab) == 0 {
		c.slab = make([]attemptCtx, ctxSlab)
	}
	x := &c.slab[0]
	c.slab = c.slab[1:]
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

func (c *attemptCtx) materialize() *realCtx {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.real.Load(); r != nil {
		return r
	}
	ctx, cancel := context.WithCancel(c.parent)
	r := &realCtx{ctx, cancel}
	if c.err != nil {
		cancel()
	}
	c.real.Store(r)
	return r
}

// Err reports the error the context ended with. Once it has reported one,
// it keeps reporting the same.
func (c *attemptCtx) Err() error {
	if c.ended.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	}
	if r := c.real.Load(); r != nil {
		return r.ctx.Err()
	}
	return c.parent.Err()
}

// cancel ends the context with context.Canceled, unless it had ended
// already (the parent's end is then kept).
func (c *attemptCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if r := c.real.Load(); r != nil {
		r.cancel()
		c.err = r.ctx.Err()
	} else if err := c.parent.Err(); err != nil {
		c.err = err
	} else {
		c.err = context.Canceled
	}
	c.ended.Store(true)
}

func (c *attemptCtx) String() string { return "hedge.attempt" }
