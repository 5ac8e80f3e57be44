package breaker

import (
	"context"

	"github.com/stormguard/stormguard/clock"
)

// scheduleProbe starts the timer of the active probe of the open epoch pe.
// It is called without the lock; on a virtual clock the probe may run
// inside AfterFunc.
func (b *Breaker) scheduleProbe(pe *epoch) {
	t := b.clk.AfterFunc(pe.probeAt.Sub(b.clk.Now()), func() { b.runProbe(pe) })
	b.mu.Lock()
	if b.closed || b.cur.Load() != pe {
		b.mu.Unlock()
		t.Stop()
		return
	}
	b.probeTimer = t
	b.mu.Unlock()
}

// runProbe runs the active probe for the open epoch pe and applies its
// verdict if pe is still current.
func (b *Breaker) runProbe(pe *epoch) {
	b.mu.Lock()
	if b.closed || b.cur.Load() != pe {
		b.mu.Unlock()
		return
	}
	b.probeTimer = nil
	b.probeWG.Add(1)
	b.mu.Unlock()
	defer b.probeWG.Done()

	ctx, cancel := clock.WithTimeout(b.probeCtx, b.clk, b.s.probeTimeout, ErrProbeTimeout)
	err := b.s.probe(ctx)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx) // answered too late
	}
	cancel()

	b.mu.Lock()
	if !b.closed && b.cur.Load() == pe {
		if err == nil {
			b.setLocked(pe, HalfOpen, b.clk.Now())
		} else {
			b.setLocked(pe, Open, b.clk.Now()) // a repeated trip: the period may grow
		}
	}
	b.unlock()
}

// Close stops active probing: it stops the pending probe timer, cancels a
// running probe and waits for it to return. The breaker keeps working;
// open periods then end on time, as without a Probe. Close must not be
// called from the probe itself. It is safe to call more than once, and on
// a nil Breaker.
func (b *Breaker) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.closed = true
	b.closedFlag.Store(true)
	t := b.probeTimer
	b.probeTimer = nil
	if b.probeCancel != nil {
		b.probeCancel()
	}
	b.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	b.probeWG.Wait()
}
