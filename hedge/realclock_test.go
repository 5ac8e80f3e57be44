package hedge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
