package hedge

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// A hedge delay near math.MaxInt64 must not overflow the shared timer's
// deadline: a far-future entry leaves every other entry of its shard
// working, on both arming paths (the clock read below coarseMin, the
// tick at or above it).
func TestSharedTimerHugeDelayHarmless(t *testing.T) {
	for _, huge := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Millisecond, coarseMin - 1} {
		for _, d := range []time.Duration{time.Millisecond, coarseMin} {
			s := new(timerShard)
			var far sharedTimer
			var farFired atomic.Bool
			far.init(func() { farFired.Store(true) })
			far.s = s
			if huge == coarseMin-1 {
				// A huge deadline straight in the heap, as a clock
				// read near the end of int64 would give.
				s.mu.Lock()
				far.state.Store(tHeaped)
				s.pushAt(&far, monoNow(), math.MaxInt64)
				s.mu.Unlock()
			} else {
				far.Reset(huge)
			}
			done := make(chan struct{})
			var near sharedTimer
			near.init(func() { close(done) })
			near.s = s
			near.Reset(d)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("far %v, near %v: the near timer never fired", huge, d)
			}
			if farFired.Load() {
				t.Fatalf("far %v: fired", huge)
			}
			far.Stop()
			s.mu.Lock()
			if s.t != nil {
				s.t.Stop()
			}
			if s.tick != nil {
				s.tick.Stop()
			}
			s.mu.Unlock()
		}
	}
}

// satAddMono saturates.
func TestSatAdd(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 5, 10, math.MaxInt64},
		{-5, 3, -2},
	} {
		if got := satAdd(tc.a, tc.b); got != tc.want {
			t.Errorf("satAdd(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// stepWall returns t with its wall clock reading moved by d and its
// monotonic reading kept, as a wall clock step (NTP, an operator) gives
// the next time.Now. It relies on time.Time's layout with a monotonic
// reading (wall: hasMonotonic, 33 bits of seconds since 1885, 30 of
// nanoseconds; ext: monotonic ns) and checks its own effect.
func stepWall(tb testing.TB, t time.Time, d time.Duration) time.Time {
	tb.Helper()
	if d%time.Second != 0 {
		tb.Fatal("stepWall: whole seconds only")
	}
	type timeLayout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	out := t
	l := (*timeLayout)(unsafe.Pointer(&out))
	if l.wall>>63 == 0 {
		tb.Fatal("stepWall: t has no monotonic reading")
	}
	l.wall = uint64(int64(l.wall) + int64(d/time.Second)<<30)
	if out.Unix() != t.Unix()+int64(d/time.Second) || out.Sub(t) != 0 {
		tb.Fatalf("stepWall: time.Time layout changed (%v, %v)", out.Unix()-t.Unix(), out.Sub(t))
	}
	return out
}

// Adaptive keys its slots on monotonic time: after the wall clock steps
// back an hour, new latencies count at once, not an hour later.
func TestAdaptiveIgnoresWallClockStep(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{Window: 10 * time.Second})
	t0 := time.Now()
	for range 100 {
		a.ObserveAt(t0, 10*time.Millisecond)
	}
	if d, ok := a.DelayAt(t0.Add(time.Second)); !ok || d < 10*time.Millisecond || d > 12*time.Millisecond {
		t.Fatalf("Delay = %v, %v; want about 10ms", d, ok)
	}
	// 20s later by the monotonic clock, the wall clock stepped back 1h.
	t1 := stepWall(t, t0.Add(20*time.Second), -time.Hour)
	for range 100 {
		a.ObserveAt(t1, 100*time.Millisecond)
	}
	if d, ok := a.DelayAt(t1.Add(time.Second)); !ok || d < 100*time.Millisecond || d > 113*time.Millisecond {
		t.Fatalf("after a wall clock step back: Delay = %v, %v; want about 100ms", d, ok)
	}
}

// Do feeds Adaptive the winner's latency and the loser's running time
// when it is cancelled, as an unanswered (censored) sample.
func TestDoFeedsLoserToAdaptive(t *testing.T) {
	clk := clocktest.NewFake()
	a := NewAdaptive(AdaptiveConfig{Clock: clk})
	h := &Hedger{Policy: &retry.Policy{Clock: clk}, Delay: 10 * time.Millisecond, Adaptive: a}
	started := make(chan int, 2)
	answer := make(chan struct{})
	var n atomic.Int32
	op := func(ctx context.Context) (int, error) {
		k := int(n.Add(1))
		started <- k
		if k == 1 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		<-answer
		return k, nil
	}
	out := make(chan int, 1)
	go func() { v, _ := Do(context.Background(), h, op, nil); out <- v }()
	<-started
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	<-started
	clk.Advance(5 * time.Millisecond)
	close(answer)
	if v := <-out; v != 2 {
		t.Fatalf("Do = %d, want the hedge's 2", v)
	}
	var answered, unanswered [buckets]uint32
	for i := range a.samples {
		for j := range buckets {
			answered[j] += a.samples[i].counts[j].Load()
			unanswered[j] += a.samples[i].censored[j].Load()
		}
	}
	if answered[bucket(uint64(5*time.Millisecond))] != 1 {
		t.Errorf("the winner's 5ms not observed")
	}
	if unanswered[bucket(uint64(15*time.Millisecond))] != 1 {
		t.Errorf("the loser's 15ms not observed as unanswered")
	}
}
