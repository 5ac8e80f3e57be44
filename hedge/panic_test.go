package hedge_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
)

// runPanics runs Do and returns what it panicked with.
func runPanics(h *hedge.Hedger, s *script) chan any {
	out := make(chan any, 1)
	go func() {
		defer func() { out <- recover() }()
		hedge.Do(context.Background(), h, s.op, s.release)
	}()
	return out
}

func TestPanics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		panicker int // the attempt that panics; the other stays until cancelled
	}{
		{"first attempt", 1},
		{"hedge", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake()
			ev := new(events)
			cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
			br := &countingBreaker{}
			p := policy(clk, ev)
			p.Budget, p.Breaker = cb, br
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			out := runPanics(h, s)
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
			s.wait(t, 2)
			s.answer(tc.panicker, "boom", errPanic)
			var got any
			select {
			case got = <-out:
			case <-time.After(10 * time.Second):
				t.Fatal("Do did not return")
			}
			if got != "boom" {
				t.Fatalf("Do panicked with %v, want boom", got)
			}
			other := 3 - tc.panicker
			if s.ctx(other).Err() == nil {
				t.Fatalf("attempt %d not cancelled", other)
			}
			if rel := s.releasedValues(); len(rel) != 1 || !slices.Contains(rel, "v"+string(rune('0'+other))+"-cancelled") {
				t.Fatalf("released %q", rel)
			}
			if req, ret := cb.Active(); req != 0 || ret != 0 {
				t.Fatalf("concurrency budget after the panic: %d requests, %d retries active", req, ret)
			}
			if br.allows != 2 || br.dones != 2 {
				t.Fatalf("breaker: %d allows, %d dones", br.allows, br.dones)
			}
			if log := ev.String(); !strings.Contains(log, "callend:panic/2") {
				t.Fatalf("events %s", log)
			}
			if clk.Pending() != 0 {
				t.Fatalf("%d timers left", clk.Pending())
			}
		})
	}
}
