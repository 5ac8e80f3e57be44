package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
)

// panickyObserver panics in one hedge event.
type panickyObserver struct {
	events
	in string
}

func (o *panickyObserver) HedgeStarted(ctx context.Context, e hedge.Event) {
	o.events.HedgeStarted(ctx, e)
	if o.in == "started" {
		panic("observer boom")
	}
}

func (o *panickyObserver) HedgeWon(ctx context.Context, e hedge.Event) {
	o.events.HedgeWon(ctx, e)
	if o.in == "won" {
		panic("observer boom")
	}
}

func (o *panickyObserver) HedgeCancelled(ctx context.Context, e hedge.Event) {
	o.events.HedgeCancelled(ctx, e)
	if o.in == "cancelled" {
		panic("observer boom")
	}
}

// A hedge.Observer that panics — on the clock's timer (HedgeStarted), in
// a hedge's goroutine (HedgeWon) or in the caller's (HedgeCancelled of
// the first attempt) — neither crashes the process from a goroutine of
// Do's nor hangs it: the attempts are cancelled and waited for, their
// concurrency slots are freed, and the panic goes on in the caller's
// goroutine.
func TestHedgeObserverPanicReachesCaller(t *testing.T) {
	for _, in := range []string{"started", "won", "cancelled"} {
		t.Run(in, func(t *testing.T) {
			clk := clocktest.NewFake()
			ev := &panickyObserver{in: in}
			cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
			p := policy(clk, ev)
			p.Budget = cb
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			out, pan := runRelease(h, s, s.release)
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
			if in != "started" {
				s.wait(t, 2)
				s.answer(2, "v2", nil)
			}
			wantPanic(t, out, pan, "observer boom")
			if req, ret := cb.Active(); req != 0 || ret != 0 {
				t.Fatalf("concurrency budget after the panic: %d requests, %d retries active", req, ret)
			}
			if err := s.ctx(1).Err(); err == nil {
				t.Fatal("attempt 1 not cancelled")
			}
		})
	}
}
