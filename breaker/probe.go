package breaker

import (
	"context"
	"errors"

	"github.com/stormguard/stormguard/clock"
)

// scheduleProbe starts the timer of the active probe of the open epoch pe.
// It is called without the lock; on a virtual clock the probe may run
// inside AfterFunc. If the Clock panics, pe's open period ends on time, as
// without a Probe, and the panic goes on.
func (b *Breaker) scheduleProbe(pe *epoch) {
	armed := false
	defer func() {
		if !armed {
			pe.unprobed.Store(true)
			pe.due.Store(true)
		}
	}()
	t := b.clk.AfterFunc(pe.probeAt.Sub(b.clk.Now()), func() { b.runProbe(pe) })
	armed = true
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
// verdict if pe is still current. A probe that panics counts as failed
// (the open period restarts and the next probe is scheduled) before the
// panic goes on.
func (b *Breaker) runProbe(pe *epoch) {
	b.mu.Lock()
	if b.closed || b.cur.Load() != pe {
		b.mu.Unlock()
		return
	}
	b.probeTimer = nil
	b.probeWG.Add(1)
	b.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // the probe panicked
			b.probeVerdict(pe, errProbePanicked)
		}
	}()
	err := b.callProbe()
	finished = true
	b.probeVerdict(pe, err)
}

// errProbePanicked is the verdict of a probe that panicked.
var errProbePanicked = errors.New("breaker: probe panicked")

// callProbe runs Config.Probe once under Config.ProbeTimeout.
func (b *Breaker) callProbe() error {
	ctx, cancel := clock.WithTimeout(b.probeCtx, b.clk, b.s.probeTimeout, ErrProbeTimeout)
	defer cancel()
	err := b.s.probe(ctx)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx) // answered too late
	}
	return err
}

// probeVerdict applies the result of the active probe of pe, then ends the
// probe for Close before the listeners hear of the change: a listener may
// call Close.
func (b *Breaker) probeVerdict(pe *epoch, err error) {
	b.mu.Lock()
	ended := false
	defer func() {
		if !ended { // Config.Clock or Rand panicked
			b.probeWG.Done()
		}
		b.unlock()
	}()
	if !b.closed && b.cur.Load() == pe {
		if err == nil {
			b.setLocked(pe, HalfOpen, b.clk.Now())
		} else {
			b.setLocked(pe, Open, b.clk.Now()) // a repeated trip: the period may grow
		}
	}
	ended = true
	b.probeWG.Done()
}

// Close stops active probing: it stops the pending probe timer, cancels a
// running probe and waits for it to return. The breaker keeps working;
// open periods then end on time, as without a Probe. A listener (see
// Subscribe) may call Close, also while it hears a change the probe made;
// the probe function itself must not. Close is safe to call more than
// once, and on a nil Breaker.
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
	var end *epoch // an open period probing governed: it now ends on time
	if e := b.cur.Load(); e.state == Open && !e.due.Load() && b.s.probe != nil {
		if b.gate {
			end = e
		} else {
			e.due.Store(true)
		}
	}
	b.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if end != nil {
		b.scheduleEnd(end)
	}
	b.probeWG.Wait()
}
