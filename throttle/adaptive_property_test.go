package throttle_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/throttle"
)

// cubicRef is the reference curve, written after botocore's
// retries/adaptive.py (ClientRateLimiter, RateClocker), throttling.py
// (CubicCalculator) and bucket.py (TokenBucket.max_rate), independently
// of the package's code.
type cubicRef struct {
	// RateClocker
	measured, lastBucket float64
	count                float64
	// CubicCalculator
	wMax, k, lastFail float64
	// ClientRateLimiter, TokenBucket
	enabled  bool
	fillRate float64
}

func newCubicRef(now float64) *cubicRef {
	r := &cubicRef{lastBucket: math.Floor(now), lastFail: now, fillRate: 1}
	r.k = math.Pow(r.wMax*(1-0.7)/0.4, 1.0/3)
	return r
}

func (r *cubicRef) answer(now float64, throttled bool) {
	bucket := math.Floor(now*2) / 2
	r.count++
	if bucket > r.lastBucket {
		r.measured = r.count/(bucket-r.lastBucket)*0.8 + r.measured*0.2
		r.count, r.lastBucket = 0, bucket
	}
	var rate float64
	if !throttled {
		rate = 0.4*math.Pow(now-r.lastFail-r.k, 3) + r.wMax
	} else {
		use := r.measured
		if r.enabled {
			use = min(r.measured, r.fillRate)
		}
		r.wMax = use
		r.k = math.Pow(r.wMax*(1-0.7)/0.4, 1.0/3)
		r.lastFail = now
		rate = use * 0.7
		r.enabled = true
	}
	r.fillRate = max(min(rate, 2*r.measured), 0.5)
}

// TestAdaptiveProperties: on random sequences of throttling and other
// answers at random instants, the limiter's fill rate and measured send
// rate follow the reference curve within 1%, and it is in use exactly once
// a throttle has been seen.
func TestAdaptiveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := time.Unix(rapid.Int64Range(0, 1e9).Draw(t, "start_s"), 0)
		clk := clocktest.NewFakeAt(start)
		a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
		ref := newCubicRef(float64(start.UnixNano()) / 1e9)
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for i := range steps {
			clk.Advance(time.Duration(rapid.IntRange(0, 1500).Draw(t, "dt_ms")) * time.Millisecond)
			throttled := rapid.IntRange(0, 4).Draw(t, "throttle?") == 0
			var err error
			if throttled {
				err = errOverload
			} else if rapid.Bool().Draw(t, "error?") {
				err = errPlain // an answer, not a throttle
			}
			a.Answer(err)
			ref.answer(float64(clk.Now().UnixNano())/1e9, throttled)
			st := a.Stats()
			if !within(st.FillRate, ref.fillRate, 0.01) || !within(st.MeasuredRate, ref.measured, 0.01) {
				t.Fatalf("step %d: fill %v measured %v, reference %v %v", i, st.FillRate, st.MeasuredRate, ref.fillRate, ref.measured)
			}
			if st.Enabled != ref.enabled {
				t.Fatalf("step %d: enabled %v, reference %v", i, st.Enabled, ref.enabled)
			}
		}
	})
}
