package admission_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// heard is a Limit that keeps every sample it hears.
type heard struct {
	limit   int
	samples []sample
	noLoad  []time.Duration
}

type sample struct {
	rtt      time.Duration
	inflight int
	dropped  bool
}

func (h *heard) OnSample(_ time.Time, rtt time.Duration, inflight int, dropped bool) {
	h.samples = append(h.samples, sample{rtt, inflight, dropped})
}
func (h *heard) Limit() int                   { return h.limit }
func (h *heard) SetNoLoadRTT(d time.Duration) { h.noLoad = append(h.noLoad, d) }

func (h *heard) last(t *testing.T, n int) sample {
	t.Helper()
	if len(h.samples) != n {
		t.Fatalf("the algorithm heard %d samples, want %d", len(h.samples), n)
	}
	return h.samples[n-1]
}

// sampler drives a Limiter whose sampling decisions the test makes: a
// request is timed (while the Limiter samples) when pick says so.
type sampler struct {
	t    *testing.T
	f    *clocktest.Fake
	l    *admission.Limiter
	pick bool
}

func newSampler(t *testing.T, c admission.Config) *sampler {
	s := &sampler{t: t, f: clocktest.NewFake()}
	c.Clock = s.f
	s.l = newLimiter(t, c)
	admission.SampleForTest(s.l, func() uint32 {
		if s.pick {
			return 0
		}
		return 1
	})
	return s
}

// round admits n requests, picking request i for timing when timed(i);
// ends those picked after 1ms and the others after 3ms (dropping the
// first one not picked if drop), waits out the window and closes it
// with one more request of 1ms, picked as closer says.
func (s *sampler) round(n int, timed func(i int) bool, drop, closer bool) {
	s.t.Helper()
	var fast, slow []admission.Permit
	for i := range n {
		s.pick = timed(i)
		p, err := s.l.TryAcquire()
		if err != nil {
			s.t.Fatal(err)
		}
		if s.pick {
			fast = append(fast, p)
		} else {
			slow = append(slow, p)
		}
	}
	s.f.Advance(time.Millisecond)
	for _, p := range fast {
		p.Release()
	}
	s.f.Advance(2 * time.Millisecond)
	for i, p := range slow {
		if drop && i == 0 {
			p.Drop()
			continue
		}
		p.Release()
	}
	s.f.Advance(10 * time.Millisecond)
	s.pick = closer
	p, err := s.l.TryAcquire()
	if err != nil {
		s.t.Fatal(err)
	}
	s.f.Advance(time.Millisecond)
	p.Release()
}

func all(int) bool      { return true }
func none(int) bool     { return false }
func oneIn8(i int) bool { return i%8 == 0 }

// TestLimiterSamplingKeepsMeanInFlightAndDrops (issue 38 item 8, the
// cost of admission): at high rates a Limiter times one request in 8 and
// reads no clock for the others. The window's mean RTT is then the timed
// requests' mean, while its most in flight and its drops still count
// every request; below half the rate every request is timed again.
func TestLimiterSamplingKeepsMeanInFlightAndDrops(t *testing.T) {
	h := &heard{limit: 5000}
	s := newSampler(t, admission.Config{Limit: h, Window: 10 * time.Millisecond, WindowSamples: 1, ProbeInterval: -1})

	// 2000 requests in a window, all timed (the Limiter does not sample
	// yet, whatever the coin says): mean of 1ms and 3ms.
	s.round(2000, oneIn8, false, true)
	got := h.last(t, 1)
	want := (250*time.Millisecond + 1750*3*time.Millisecond + time.Millisecond) / 2001
	if got.rtt != want || got.inflight != 2000 || got.dropped {
		t.Fatalf("first window: heard %+v, want rtt %v, in flight 2000, no drop (every request timed)", got, want)
	}

	// Now it samples: only the 250 picked (1ms) and the closer are timed,
	// but the most in flight and the drop of one not picked count.
	s.round(2000, oneIn8, true, true)
	got = h.last(t, 2)
	if got.rtt != time.Millisecond || got.inflight != 2000 || !got.dropped {
		t.Fatalf("sampled window: heard %+v, want rtt 1ms (the timed requests only), in flight 2000, dropped", got)
	}

	// 50 requests: 7 timed and the closer, about 64 in all, below 512.
	s.round(50, oneIn8, false, true)
	got = h.last(t, 3)
	if got.rtt != time.Millisecond || got.inflight != 50 {
		t.Fatalf("slow sampled window: heard %+v, want rtt 1ms, in flight 50", got)
	}

	// So every request is timed again, though the coin picks none.
	s.round(50, none, false, false)
	got = h.last(t, 4)
	want = (50*3*time.Millisecond + time.Millisecond) / 51
	if got.rtt != want || got.inflight != 50 {
		t.Fatalf("after the rate fell: heard %+v, want rtt %v (every request timed again), in flight 50", got, want)
	}
}

// TestLimiterSamplingProbeTimesEveryRequest: a probe for the no-load RTT
// times every request, also when the window before it was sampled.
func TestLimiterSamplingProbeTimesEveryRequest(t *testing.T) {
	h := &heard{limit: 5000}
	s := newSampler(t, admission.Config{
		Limit: h, Window: 10 * time.Millisecond, WindowSamples: 1,
		ProbeInterval: 20 * time.Millisecond, ProbeJitter: -1,
	})
	s.round(2000, all, false, true)    // closes at 15ms: sampling from now on
	s.round(2000, oneIn8, false, true) // closes at 30ms: the probe begins
	if !s.l.Probing() {
		t.Fatal("no probe after 30ms with a probe interval of 20ms")
	}
	// The probe's window: three requests the coin does not pick.
	s.pick = false
	ps := []admission.Permit{mustAcquire(t, s.l), mustAcquire(t, s.l), mustAcquire(t, s.l)}
	s.f.Advance(12 * time.Millisecond)
	for _, p := range ps {
		p.Release()
	}
	if s.l.Probing() || len(h.noLoad) != 1 || h.noLoad[0] != 12*time.Millisecond {
		t.Fatalf("after the probe's window: probing %v, no-load RTTs heard %v; want the probe over with [12ms]", s.l.Probing(), h.noLoad)
	}
}
