package hedge

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestSharedTimerNeverEarly arms real-clock hedge timers on both paths
// (a clock read below coarseMin, the shard's tick at or above it) and
// checks that every callback comes, and none before its delay.
func TestSharedTimerNeverEarly(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, coarseMin, 40 * time.Millisecond} {
		const n = 20
		var wg sync.WaitGroup
		armed := make([]time.Time, n)
		fired := make([]time.Time, n)
		timers := make([]sharedTimer, n)
		for i := range timers {
			wg.Add(1)
			timers[i].init(func() { fired[i] = time.Now(); wg.Done() })
		}
		for i := range timers {
			armed[i] = time.Now()
			if timers[i].Reset(d) {
				t.Fatalf("%v: Reset of a new timer reports it pending", d)
			}
		}
		waitGroup(t, &wg)
		for i := range timers {
			if got := fired[i].Sub(armed[i]); got < d {
				t.Errorf("delay %v: timer %d called back after %v", d, i, got)
			}
			if timers[i].Stop() {
				t.Errorf("delay %v: Stop after the callback reports it pending", d)
			}
		}
	}
}

// TestSharedTimerStop checks that a stopped timer is not called back: the
// timers armed after it, with the same delay, have been.
func TestSharedTimerStop(t *testing.T) {
	for _, d := range []time.Duration{coarseMin - time.Millisecond, 3 * coarseMin} {
		var mu sync.Mutex
		calls := map[int]int{}
		var wg sync.WaitGroup
		timers := make([]sharedTimer, 10)
		for i := range timers {
			timers[i].init(func() {
				mu.Lock()
				calls[i]++
				mu.Unlock()
				wg.Done()
			})
		}
		for i := range timers {
			wg.Add(1)
			timers[i].Reset(d)
		}
		for i := 0; i < len(timers); i += 2 {
			if !timers[i].Stop() {
				t.Fatalf("delay %v: Stop of a pending timer reports it was not", d)
			}
			wg.Done()
		}
		// Reset of a pending timer moves it, once.
		if !timers[1].Reset(d) {
			t.Fatalf("delay %v: Reset of a pending timer reports it was not", d)
		}
		waitGroup(t, &wg)
		mu.Lock()
		for i := range timers {
			want := i % 2
			if calls[i] != want {
				t.Errorf("delay %v: timer %d called back %d times, want %d", d, i, calls[i], want)
			}
		}
		mu.Unlock()
	}
}

// TestSharedTimerHeap checks the shard's heap against a sorted slice under
// random pushes and removals.
func TestSharedTimerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s timerShard
	var in []*sharedTimer
	for range 2000 {
		if len(in) == 0 || r.IntN(3) > 0 {
			x := &sharedTimer{s: &s, index: -1, when: r.Int64N(100)}
			s.push(x)
			in = append(in, x)
		} else {
			i := r.IntN(len(in))
			s.remove(in[i].index)
			if in[i].index != -1 {
				t.Fatal("removed entry keeps an index")
			}
			in = slices.Delete(in, i, i+1)
		}
		for i, x := range s.heap {
			if x.index != i {
				t.Fatalf("entry at %d has index %d", i, x.index)
			}
			if i > 0 && s.heap[(i-1)/2].when > x.when {
				t.Fatalf("heap order broken at %d", i)
			}
		}
	}
	var got, want []int64
	for _, x := range in {
		want = append(want, x.when)
	}
	slices.Sort(want)
	for len(s.heap) > 0 {
		got = append(got, s.heap[0].when)
		s.remove(0)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("timer callbacks did not all come within 10s")
	}
}

// TestSharedTimerParked covers the parked entries of the list: a timer
// stopped and armed again at once (a busy Hedger's steady state) calls
// back once and never early, with the same delay or a new one; a parked
// entry leaves the list after parkTicks ticks, and the shard's tick stops
// once its list is empty, so an idle process is not woken every tick.
func TestSharedTimerParked(t *testing.T) {
	for _, d2 := range []time.Duration{coarseMin, 2 * coarseMin} {
		var mu sync.Mutex
		var fired []time.Time
		var wg sync.WaitGroup
		var st sharedTimer
		st.init(func() {
			mu.Lock()
			fired = append(fired, time.Now())
			mu.Unlock()
			wg.Done()
		})
		for range 1000 { // armed and stopped: never called back
			st.Reset(coarseMin)
			if !st.Stop() {
				t.Fatal("Stop of a timer just armed reports it was not pending")
			}
		}
		wg.Add(1)
		armed := time.Now()
		if st.Reset(d2) {
			t.Fatal("Reset of a stopped timer reports it pending")
		}
		waitGroup(t, &wg)
		time.Sleep(3 * tickPeriod) // a second callback would come by now
		mu.Lock()
		if len(fired) != 1 {
			t.Errorf("delay %v: %d callbacks, want 1", d2, len(fired))
		} else if got := fired[0].Sub(armed); got < d2 {
			t.Errorf("delay %v: called back after %v", d2, got)
		}
		mu.Unlock()

		// Parked, then dropped, then the tick stops.
		st.Reset(coarseMin)
		st.Stop()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st.s.mu.Lock()
			gone := !st.listed && st.index < 0 && !st.s.tickArmed
			st.s.mu.Unlock()
			if gone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delay %v: a stopped entry still listed (or the tick still armed) after 5s", d2)
			}
			time.Sleep(time.Millisecond)
		}
		if st.Stop() {
			t.Errorf("delay %v: Stop of a dropped entry reports it pending", d2)
		}
	}
}
