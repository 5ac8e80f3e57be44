package throttle_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/throttle"
)

// TestSREConcurrentCounts: requests and accepts from many goroutines are
// all counted (no lost update) while the slot does not change, and counts
// never exceed what was made while another goroutine moves time on (an
// accept counts in the slot of its answer, its request in the slot it was
// sent in, so the two need not be in one window).
func TestSREConcurrentCounts(t *testing.T) {
	const g, n = 8, 2000
	t.Run("one slot", func(t *testing.T) {
		th := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake()})
		var wg sync.WaitGroup
		for range g {
			wg.Go(func() {
				for range n {
					if done, err := th.Allow(); err == nil {
						done(nil)
					}
				}
			})
		}
		wg.Wait()
		if s := th.Stats(); s.Requests != g*n || s.Accepts != g*n || s.Rejected != 0 {
			t.Fatalf("stats %+v, want %d requests and accepts", s, g*n)
		}
	})
	t.Run("moving slots", func(t *testing.T) {
		clk := clocktest.NewFake()
		th := throttle.NewSRE(throttle.SREConfig{Clock: clk, Window: time.Second, Buckets: 4, Rand: backoff.NewSource(3)})
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				clk.Advance(10 * time.Millisecond)
				if s := th.Stats(); s.Requests > g*n || s.Accepts > g*n {
					t.Errorf("stats %+v beyond what was made", s)
					return
				}
			}
		})
		var made sync.WaitGroup
		for i := range g {
			made.Go(func() {
				for j := range n {
					if done, err := th.Allow(); err == nil {
						if (i+j)%3 == 0 {
							done(errOverload)
						} else {
							done(nil)
						}
					}
				}
			})
		}
		made.Wait()
		close(stop)
		wg.Wait()
		if s := th.Stats(); s.Rejected > g*n {
			t.Fatalf("stats %+v", s)
		}
	})
}
