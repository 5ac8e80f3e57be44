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
