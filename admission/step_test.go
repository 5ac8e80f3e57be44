package admission_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// stepClock is a fake clock that can also step back, as a wall clock
// does when it is corrected.
type stepClock struct {
	*clocktest.Fake
	mu   sync.Mutex
	back time.Duration
}

func (s *stepClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Fake.Now().Add(-s.back)
}
func (s *stepClock) Since(t time.Time) time.Duration { return s.Now().Sub(t) }
func (s *stepClock) stepBack(d time.Duration) {
	s.mu.Lock()
	s.back += d
	s.mu.Unlock()
}

var _ clock.Clock = (*stepClock)(nil)

func TestLimiterClockStepBackKeepsFollowingSamples(t *testing.T) {
	c := &stepClock{Fake: clocktest.NewFake()}
	g, _ := admission.NewGradient2(admission.Gradient2Config{InitialLimit: 10, MinLimit: 2, MaxLimit: 100})
	l := newLimiter(t, admission.Config{Limit: g, Clock: c, ProbeInterval: -1, Window: 10 * time.Millisecond})
	round := func() {
		ps := make([]admission.Permit, 0, l.Limit())
		for range l.Limit() {
			p, err := l.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		c.Advance(10 * time.Millisecond)
		for _, p := range ps {
			p.Release()
		}
	}
	for range 10 {
		round()
	}
	before := l.Limit()
	// A step back an hour while the limit's worth are in flight: their
	// RTTs are negative, and the window opened an hour "later".
	ps := make([]admission.Permit, 0, l.Limit())
	for range l.Limit() {
		p, _ := l.TryAcquire()
		ps = append(ps, p)
	}
	c.stepBack(time.Hour)
	for _, p := range ps {
		p.Release()
	}
	if got := l.Limit(); got < before {
		t.Fatalf("limit %d right after the step, was %d", got, before)
	}
	for range 10 {
		round()
	}
	if got := l.Limit(); got <= before {
		t.Fatalf("limit %d after 10 more steady windows, was %d: want it still growing (windows closing)", got, before)
	}
}

// panicLimit panics in OnSample once armed.
type panicLimit struct{ armed bool }

func (p *panicLimit) OnSample(time.Time, time.Duration, int, bool) {
	if p.armed {
		panic("algorithm bug")
	}
}
func (*panicLimit) Limit() int { return 1 }

func TestLimiterAlgorithmPanicLeavesItConsistent(t *testing.T) {
	f := clocktest.NewFake()
	alg := &panicLimit{}
	l := newLimiter(t, admission.Config{Limit: alg, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
	hold := mustAcquire(t, l)
	out := make(chan result, 1)
	enqueue(t, l, t.Context(), "A", out)
	f.Advance(10 * time.Millisecond)
	alg.armed = true
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the algorithm's panic did not go on")
			}
		}()
		hold.Release() // closes the window: OnSample panics
	}()
	a := expect(t, out, "A", nil) // the freed slot still went to the queue
	alg.armed = false
	f.Advance(time.Millisecond)
	a.p.Release()
	if l.InFlight() != 0 || l.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d", l.InFlight(), l.Queued())
	}
}

// TestLimiterClockStepBackKeepsSamplingAndProbing (outside review): a
// clock that steps back an hour right after a probe, below the Limiter's
// start, still has the algorithm hear samples at once and probes go on.
// (Before: the start of the last probe, from which requests are sampled,
// stayed an hour ahead, so no request was sampled until the clock caught
// up; and the next probe's time, moved back below zero, read as the
// "never" of -1: no probe ever again.)
func TestLimiterClockStepBackKeepsSamplingAndProbing(t *testing.T) {
	c := &stepClock{Fake: clocktest.NewFake()}
	rec := &recording{limit: 50}
	l := newLimiter(t, admission.Config{Limit: rec, Clock: c, Window: 10 * time.Millisecond, WindowSamples: 1, ProbeInterval: 50 * time.Millisecond, ProbeJitter: -1})
	step := func(d time.Duration) {
		p := mustAcquire(t, l)
		c.Advance(d)
		p.Release()
	}
	for !l.Probing() {
		step(10 * time.Millisecond)
	}
	for l.Probing() {
		step(10 * time.Millisecond)
	}
	c.stepBack(time.Hour)
	before := rec.samples
	for range 100 { // a second of requests of 10 ms, a window each (one in 6 a probe)
		step(10 * time.Millisecond)
	}
	if rec.samples < before+75 {
		t.Errorf("%d samples in the second after the clock stepped back an hour, want about 83 (%d before)", rec.samples-before, before)
	}
	probes, was := 0, false
	for range 10_000 { // 100 s of requests of 10 ms: about 330 probes due
		step(10 * time.Millisecond)
		if p := l.Probing(); p && !was {
			probes++
		}
		was = l.Probing()
	}
	if probes < 100 {
		t.Errorf("%d probes in the 100 s after the step back (ProbeInterval 50ms), want hundreds", probes)
	}
}
