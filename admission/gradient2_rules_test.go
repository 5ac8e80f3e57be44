package admission_test

import (
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
)

// netflixStep is one _update of Netflix's Gradient2Limit
// (concurrency-limits-core, limit/Gradient2Limit.java), with the queue
// allowance q: what a Gradient2 sample must do to the limit, given the
// long-term RTT after the sample.
func netflixStep(limit, q, tolerance, smoothing, lo, hi, long, short float64, inflight int) float64 {
	if float64(inflight) < limit/2 {
		return limit
	}
	gradient := math.Max(0.5, math.Min(1, tolerance*long/short))
	est := limit*gradient + q
	return math.Max(lo, math.Min(hi, limit*(1-smoothing)+est*smoothing))
}

func newG2(t *testing.T, c admission.Gradient2Config) *admission.Gradient2 {
	t.Helper()
	g, err := admission.NewGradient2(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

const ms = float64(time.Millisecond)

// TestGradient2DefaultsFollowNetflix (issue 38 item 5): the zero config
// is Netflix's Gradient2Limit's defaults — initial limit 20, smoothing
// 0.2, RTT tolerance 1.5, a long window of 600 samples after a plain
// average of the first 10 — with the two documented departures: a queue
// allowance of √limit (Netflix: 4) and bounds [4, 1000] (Netflix: [20,
// 200]).
func TestGradient2DefaultsFollowNetflix(t *testing.T) {
	g := newG2(t, admission.Gradient2Config{})
	if l, _ := g.StateForTest(); l != 20 {
		t.Fatalf("initial limit %v, want 20", l)
	}
	// Ten samples of 10ms, app-limited (nothing in flight): the limit
	// stays, the long-term RTT is their plain mean.
	for range 10 {
		g.OnSample(t0, 10*time.Millisecond, 0, false)
	}
	if l, long := g.StateForTest(); l != 20 || !near(long, 10*ms) {
		t.Fatalf("after 10 app-limited samples: limit %v, long RTT %v; want 20, 10ms", l, long)
	}
	// The 11th, 12ms, saturated: the long-term RTT moves by 2/601 of the
	// step, the gradient is 1.5 × long/short, the limit moves by 0.2 of
	// the way to limit × gradient + √limit.
	g.OnSample(t0, 12*time.Millisecond, 20, false)
	wantLong := 10*ms + (2*ms)*2/601
	want := netflixStep(20, math.Sqrt(20), 1.5, 0.2, 4, 1000, wantLong, 12*ms, 20)
	if l, long := g.StateForTest(); !near(long, wantLong) || !near(l, want) {
		t.Fatalf("after the 11th sample: limit %v, long RTT %v; want %v, %v", l, long, want, wantLong)
	}
	// Far slower (5× the long-term RTT): the gradient is held at 0.5.
	l0, _ := g.StateForTest()
	g.OnSample(t0, 60*time.Millisecond, 100, false)
	_, long := g.StateForTest()
	if l, _ := g.StateForTest(); !near(l, netflixStep(l0, math.Sqrt(l0), 1.5, 0.2, 4, 1000, long, 60*ms, 100)) || l >= l0 {
		t.Fatalf("after a 60ms sample: limit %v (was %v), want it shrunk with a gradient of 0.5", l, l0)
	}
}

// TestGradient2RulesStepByStep (issue 38 item 5): a sequence of samples
// against a transcription of Netflix's _update, rule by rule: the
// app-limited rule (fewer than half the limit in flight: the limit stays,
// the long-term RTT still learns), the gradient's clamp to [0.5, 1], the
// 5% decay of the long-term RTT while it is more than twice the sample,
// the warm-up's plain average (which a decay does not outlast, as in
// ExpAvgMeasurement: the average is of the samples), and the bounds.
func TestGradient2RulesStepByStep(t *testing.T) {
	const lo, hi = 15, 30
	c := admission.Gradient2Config{InitialLimit: 20, MinLimit: lo, MaxLimit: hi, LongWindow: 50}
	g := newG2(t, c)
	limit := 20.0
	var sum float64
	var count int
	long := 0.0
	f := 2.0 / 51
	top := 0.0
	for i, s := range []struct {
		rtt      float64 // ms
		inflight int
	}{
		{100, 20}, {100, 5}, {100, 20}, {100, 20}, // warm-up, one app-limited
		{40, 20},                                              // long/short = 88/40 > 2: decay (not outlasting the warm-up)
		{100, 20},                                             // the warm-up's mean of the samples, not of the decayed value
		{300, 20},                                             // gradient clamped at 0.5
		{10, 20},                                              // far faster: long/short > 2, decay after the average
		{100, 20}, {100, 20}, {100, 20}, {100, 20}, {100, 20}, // warm-up ends (10 samples)
		{100, 2},                                         // app-limited after the warm-up
		{20, 60}, {20, 60}, {20, 60}, {20, 60}, {20, 60}, // growth to the bound
		{20, 60}, {20, 60}, {20, 60}, {20, 60}, {20, 60},
		{1000, 60}, {1000, 60}, {1000, 60}, {1000, 60}, // shrink to the bound
		{1000, 60}, {1000, 60}, {1000, 60}, {1000, 60},
		{1000, 60}, {1000, 60}, {1000, 60}, {1000, 60},
		{1000, 60}, {1000, 60}, {1000, 60}, {1000, 60},
	} {
		x := s.rtt * ms
		if count < 10 {
			count++
			sum += x
			long = sum / float64(count)
		} else {
			long = long*(1-f) + x*f
		}
		if long/x > 2 {
			long *= 0.95
		}
		limit = netflixStep(limit, math.Sqrt(limit), 1.5, 0.2, lo, hi, long, x, s.inflight)
		g.OnSample(t0, time.Duration(x), s.inflight, false)
		gl, glong := g.StateForTest()
		top = math.Max(top, gl)
		if !near(gl, limit) || !near(glong, long) {
			t.Fatalf("sample %d (%vms, %d in flight): limit %v, long RTT %vms; want %v, %vms", i, s.rtt, s.inflight, gl, glong/ms, limit, long/ms)
		}
	}
	if l := g.Limit(); top != hi || l != lo {
		t.Fatalf("highest limit %v, last %d; want the bounds reached, %d and %d", top, l, hi, lo)
	}
}
