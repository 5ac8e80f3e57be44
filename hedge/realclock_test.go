package hedge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// TestRealClockHedge runs a hedged call on the real clock, with a delay
// armed by a clock read and one armed by the shared timers' tick: the
// first attempt hangs until cancelled, the hedge answers and wins, and it
// started no earlier than the delay.
func TestRealClockHedge(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Millisecond, 30 * time.Millisecond} {
		h := &hedge.Hedger{Policy: &retry.Policy{}, Delay: d}
		var first context.Context
		var hedgeAt atomic.Int64
		start := time.Now()
		v, err := hedge.Do(context.Background(), h, func(ctx context.Context) (string, error) {
			if n, _, _ := hedge.AttemptOf(ctx); n == 1 {
				first = ctx
				<-ctx.Done()
				return "", ctx.Err()
			}
			hedgeAt.Store(int64(time.Since(start)))
			return "hedge", nil
		}, nil)
		if v != "hedge" || err != nil {
			t.Fatalf("delay %v: Do = %q, %v, want the hedge's answer", d, v, err)
		}
		if got := time.Duration(hedgeAt.Load()); got < d {
			t.Errorf("delay %v: the hedge started after %v", d, got)
		}
		if first.Err() == nil {
			t.Errorf("delay %v: the first attempt's context is not cancelled", d)
		}
	}
}

// TestRetainedContextStaysEnded keeps the context of a call's first
// attempt and checks that later calls (which take their contexts from the
// same pooled state) leave it ended, with its own values.
func TestRetainedContextStaysEnded(t *testing.T) {
	type key struct{}
	h := &hedge.Hedger{Policy: &retry.Policy{}, Delay: time.Hour}
	var kept context.Context
	parent := context.WithValue(context.Background(), key{}, "first")
	hedge.Do(parent, h, func(ctx context.Context) (int, error) { kept = ctx; return 1, nil }, nil)
	for i := range 200 {
		other := context.WithValue(context.Background(), key{}, i)
		hedge.Do(other, h, func(ctx context.Context) (int, error) {
			if ctx == kept {
				t.Fatal("a later call got the kept context")
			}
			return 1, nil
		}, nil)
	}
	if kept.Err() != context.Canceled {
		t.Errorf("kept context: Err = %v, want context.Canceled", kept.Err())
	}
	select {
	case <-kept.Done():
	default:
		t.Error("kept context: Done not closed")
	}
	if v := kept.Value(key{}); v != "first" {
		t.Errorf("kept context: Value = %v, want its own parent's", v)
	}
	if n, hedged, ok := hedge.AttemptOf(kept); n != 1 || hedged || !ok {
		t.Errorf("kept context: AttemptOf = %d, %v, %v", n, hedged, ok)
	}
}

// TestRealClockHedgeAfterQuietCalls: calls that answer before the delay
// leave the pooled call's timer entry parked with their delay, and the
// next call with that delay re-arms it with one compare-and-swap (do's
// inline arming): a first attempt that then hangs must still see its
// hedge start, and no earlier than its own delay, also when the calls
// before it parked the entry with a shorter one. Run from one goroutine,
// the calls mostly share their P's call.
func TestRealClockHedgeAfterQuietCalls(t *testing.T) {
	quick := func(context.Context) (string, error) { return "quick", nil }
	for _, tc := range []struct{ quick, hang time.Duration }{
		{20 * time.Millisecond, 20 * time.Millisecond},
		{20 * time.Millisecond, 60 * time.Millisecond},
	} {
		hq := &hedge.Hedger{Policy: &retry.Policy{}, Delay: tc.quick}
		hh := &hedge.Hedger{Policy: &retry.Policy{}, Delay: tc.hang}
		for round := range 3 {
			for range 50 {
				if v, err := hedge.Do(context.Background(), hq, quick, nil); v != "quick" || err != nil {
					t.Fatalf("%v: quick call = %q, %v", tc, v, err)
				}
			}
			var hedgeAt atomic.Int64
			start := time.Now()
			v, err := hedge.Do(context.Background(), hh, func(ctx context.Context) (string, error) {
				if n, _, _ := hedge.AttemptOf(ctx); n == 1 {
					select {
					case <-ctx.Done():
						return "", ctx.Err()
					case <-time.After(time.Minute): // only when the hedge never starts
						return "no hedge", nil
					}
				}
				hedgeAt.Store(int64(time.Since(start)))
				return "hedge", nil
			}, nil)
			if v != "hedge" || err != nil {
				t.Fatalf("%v round %d: Do = %q, %v, want the hedge's answer", tc, round, v, err)
			}
			if got := time.Duration(hedgeAt.Load()); got < tc.hang {
				t.Errorf("%v round %d: the hedge started after %v, before its delay", tc, round, got)
			}
		}
	}
}

// TestClockAlternates alternates calls on the real clock with calls on a
// fake one (a pooled call keeps clock.Real across real-clock calls and
// drops a Policy's Clock when given back): each fake-clock call hedges
// exactly at its delay on the fake clock, each real-clock call on the
// real one.
func TestClockAlternates(t *testing.T) {
	quick := func(context.Context) (string, error) { return "quick", nil }
	real := &hedge.Hedger{Policy: &retry.Policy{}, Delay: 20 * time.Millisecond}
	for round := range 5 {
		for range 20 {
			if v, err := hedge.Do(context.Background(), real, quick, nil); v != "quick" || err != nil {
				t.Fatalf("round %d: real-clock call = %q, %v", round, v, err)
			}
		}
		clk := clocktest.NewFake()
		fake := &hedge.Hedger{Policy: &retry.Policy{Clock: clk}, Delay: time.Hour}
		s := newScript()
		out := run(fake, s)
		s.wait(t, 1)
		clk.BlockUntil(1)
		clk.Advance(time.Hour - time.Nanosecond)
		s.noStart(t)
		clk.Advance(time.Nanosecond)
		s.wait(t, 2)
		s.answer(2, "v2", nil)
		if r := get(t, out); r.v != "v2" || r.err != nil {
			t.Fatalf("round %d: fake-clock call = %q, %v, want v2", round, r.v, r.err)
		}
		if clk.Pending() != 0 {
			t.Fatalf("round %d: %d fake timers left", round, clk.Pending())
		}
		// A real-clock call after it hedges on the real clock.
		start := time.Now()
		v, err := hedge.Do(context.Background(), real, func(ctx context.Context) (string, error) {
			if n, _, _ := hedge.AttemptOf(ctx); n == 1 {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(time.Minute): // only when the hedge never starts
					return "no hedge", nil
				}
			}
			return "hedge", nil
		}, nil)
		if v != "hedge" || err != nil || time.Since(start) < 20*time.Millisecond {
			t.Fatalf("round %d: real-clock hedged call = %q, %v after %v", round, v, err, time.Since(start))
		}
	}
}
