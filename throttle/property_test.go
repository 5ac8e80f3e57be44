package throttle_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/throttle"
)

// sreModel is the documented rule, sequentially: counts per slot, the
// window the last Buckets slots.
type sreModel struct {
	width    time.Duration
	buckets  int64
	k, maxP  float64
	minReq   uint64
	req, acc map[int64]uint64
	rejected uint64
}

func (m *sreModel) sums(slot int64) (r, a uint64) {
	for s := slot - m.buckets + 1; s <= slot; s++ {
		r += m.req[s]
		a += m.acc[s]
	}
	return r, a
}

func (m *sreModel) p(slot int64) float64 {
	r, a := m.sums(slot)
	if r < m.minReq {
		return 0
	}
	return min(formula(float64(r), float64(a), m.k), m.maxP)
}

// TestSREProperties drives an SRE throttler with random sequences of
// requests (accepted, overloaded, failing otherwise, refused by the
// breaker after admission) and time passing, and checks after every step
// that its counts, its probability and its decisions are the model's:
// the rejection probability follows the formula, and local rejections are
// counted as requests.
func TestSREProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := throttle.SREConfig{
			Window:       time.Duration(rapid.IntRange(1, 300).Draw(t, "window_s")) * time.Second,
			Buckets:      rapid.IntRange(1, 20).Draw(t, "buckets"),
			K:            float64(rapid.IntRange(1000, 4000).Draw(t, "k_milli")) / 1000,
			MaxRejection: float64(rapid.IntRange(0, 1000).Draw(t, "maxp_milli")) / 1000,
			MinRequests:  rapid.IntRange(-1, 30).Draw(t, "min_requests"),
		}
		clk := clocktest.NewFake()
		src := &scripted{}
		c.Clock, c.Rand = clk, src
		th := throttle.NewSRE(c)
		m := &sreModel{
			width: c.Window / time.Duration(c.Buckets), buckets: int64(c.Buckets), k: c.K, maxP: c.MaxRejection,
			req: map[int64]uint64{}, acc: map[int64]uint64{},
		}
		if m.maxP == 0 {
			m.maxP = 1
		}
		switch {
		case c.MinRequests == 0:
			m.minReq = throttle.DefaultMinRequests
		case c.MinRequests > 0:
			m.minReq = uint64(c.MinRequests)
		}
		start := clk.Now()
		slot := func() int64 { return int64(clk.Since(start) / m.width) }
		outcomes := []error{nil, errOverload, errPlain, breaker.ErrOpen}
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for i := range steps {
			if rapid.IntRange(0, 9).Draw(t, "advance?") == 0 {
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(c.Window)).Draw(t, "advance")))
			}
			k := slot()
			want := m.p(k)
			if got := th.RejectionProbability(); math.Abs(got-want) > 1e-9 {
				t.Fatalf("step %d: probability %v, model %v", i, got, want)
			}
			reject := false
			if want > 0 {
				u := float64(rapid.IntRange(0, 999).Draw(t, "draw")) / 1000
				reject = src.next(u) < want
			}
			m.req[k]++ // counted before it is sent, rejected or not
			done, err := th.Allow()
			if reject {
				m.rejected++
				if !errors.Is(err, throttle.ErrThrottled) {
					t.Fatalf("step %d: err %v, model rejects (p %v)", i, err, want)
				}
			} else {
				if err != nil {
					t.Fatalf("step %d: rejected, model admits (p %v): %v", i, want, err)
				}
				out := outcomes[rapid.IntRange(0, len(outcomes)-1).Draw(t, "outcome")]
				done(out)
				switch out {
				case nil, errPlain:
					m.acc[k]++
				case breaker.ErrOpen:
					m.req[k]-- // never sent: taken back
				}
			}
			r, a := m.sums(k)
			if s := th.Stats(); s.Requests != r || s.Accepts != a || s.Rejected != m.rejected {
				t.Fatalf("step %d: stats %+v, model requests %d accepts %d rejected %d", i, s, r, a, m.rejected)
			}
		}
	})
}
