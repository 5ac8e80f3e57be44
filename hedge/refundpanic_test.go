package hedge_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// refundPanics is a Concurrency budget whose Refund refunds, then panics
// with "refund".
type refundPanics struct{ *budget.Concurrency }

func (b refundPanics) Refund() {
	b.Concurrency.Refund()
	panic("refund")
}

// cancelOnSecond admits the first attempt; its second Allow (the hedge's,
// asked by hedge.Do itself when an Observer watches) cancels the caller's
// context, so that the hedge's Begin is refused before it takes the
// permit, which goes back unused: its done panics with "done".
type cancelOnSecond struct {
	mu     sync.Mutex
	n      int
	cancel context.CancelFunc
}

func (b *cancelOnSecond) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n++; b.n > 1 {
		b.cancel()
		return func(error) { panic("done") }, nil
	}
	return func(error) {}, nil
}

func (b *cancelOnSecond) Ready() error { return nil }

// The grants a hedge took from the NestedBudget and the Budget are each
// refunded when its attempt does not begin, whatever panics on the way:
// the unused breaker permit's done, or the NestedBudget's Refund. Before,
// a done that panicked left both grants reserved for good, and a Refund
// of the NestedBudget's that panicked left the Budget's.
func TestHedgeRefundPanicRefundsEveryGrant(t *testing.T) {
	for _, tc := range []struct {
		name string
		want any // the panic that goes on
	}{
		{"permit's done panics", "done"},
		{"NestedBudget's Refund panics", "refund"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake()
			nbc := budget.NewConcurrency(budget.ConcurrencyConfig{})
			b := budget.NewConcurrency(budget.ConcurrencyConfig{})
			ctx, cancel := context.WithCancel(retry.WithInbound(context.Background(), retry.Inbound{Retries: true}))
			defer cancel()
			p := &retry.Policy{MaxAttempts: 5, Clock: clk, Nested: retry.NestedBudget, Budget: b}
			if tc.want == "done" {
				p.NestedBudget = nbc
				p.Breaker = &cancelOnSecond{cancel: cancel}
				p.Observer = new(events)
			} else {
				p.NestedBudget = refundPanics{nbc}
				p.Breaker = &secondRefused{}
			}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			pan := make(chan any, 1)
			go func() {
				defer func() { pan <- recover() }()
				hedge.Do(ctx, h, s.op, s.release)
			}()
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond) // the hedge: its grants are refunded, and a callback panics
			var r any
			select {
			case r = <-pan:
			case <-time.After(10 * time.Second):
				t.Fatal("Do hangs")
			}
			if r != tc.want {
				t.Fatalf("Do panicked with %v, want %v", r, tc.want)
			}
			if req, ret := nbc.Active(); req != 0 || ret != 0 {
				t.Errorf("NestedBudget after the call: %d requests, %d retries active; want none", req, ret)
			}
			if req, ret := b.Active(); req != 0 || ret != 0 {
				t.Errorf("Budget after the call: %d requests, %d retries active; want none", req, ret)
			}
		})
	}
}
