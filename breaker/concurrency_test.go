package breaker

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHalfOpenProbeLimitConcurrent hammers a half-open breaker from many
// goroutines and checks that no more than MaxProbes calls are ever
// admitted at once.
func TestHalfOpenProbeLimitConcurrent(t *testing.T) {
	const (
		maxProbes  = 3
		goroutines = 32
		calls      = 400
	)
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, MaxProbes: maxProbes, SuccessThreshold: 1 << 30, OpenTimeout: time.Second})
	openNow(t, b)
	fc.Advance(time.Second)
	wantState(t, b, HalfOpen)

	var inflight, peak atomic.Int32
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				done, err := b.Allow()
				if err != nil {
					if err != ErrTooManyProbes {
						t.Errorf("Allow() = %v, want nil or ErrTooManyProbes", err)
						return
					}
					refused.Add(1)
					runtime.Gosched()
					continue
				}
				admitted.Add(1)
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				inflight.Add(-1)
				if (g+i)%2 == 0 {
					done(nil) // a success short of the threshold
				} else {
					done(context.Canceled) // excluded: decides nothing
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > maxProbes {
		t.Fatalf("%d calls admitted at once, MaxProbes is %d", p, maxProbes)
	}
	if admitted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("admitted %d, refused %d: the test did not contend", admitted.Load(), refused.Load())
	}
	wantState(t, b, HalfOpen)
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready() = %v after every probe ended: a slot leaked", err)
	}
	t.Logf("admitted %d, refused %d, peak %d", admitted.Load(), refused.Load(), peak.Load())
}

// TestConcurrentChaos runs random outcomes from many goroutines while time
// moves, through every state, and then checks that no probe slot leaked
// and the counts are coherent.
func TestConcurrentChaos(t *testing.T) {
	for _, cfg := range []Config{
		{ConsecutiveFailures: 3},
		{Window: Window{Calls: 20, MinCalls: 5, FailureRatio: 0.4}},
		{Window: Window{Duration: 10 * time.Second, MinCalls: 5, FailureRatio: 0.4, SlowCallDuration: 5 * time.Millisecond, SlowCallRatio: 0.6}},
		{ReadyToTrip: func(c Counts) bool { return c.ConsecutiveFailures > 2 }},
	} {
		cfg.MaxProbes, cfg.SuccessThreshold = 2, 2
		cfg.OpenTimeout, cfg.MaxOpenTimeout = 100*time.Millisecond, time.Second
		cfg.OpenJitter = 0.5
		b, fc := newTest(t, cfg)
		var changes atomic.Int64
		b.Subscribe(func(from, to State) {
			if from == to {
				t.Errorf("listener called for %v -> %v", from, to)
			}
			changes.Add(1)
		})
		stop := make(chan struct{})
		var callers, mover sync.WaitGroup
		for g := range 8 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range 2000 {
					done, err := b.Allow()
					if err != nil {
						continue
					}
					switch r.IntN(4) { // two thirds of the counted calls fail
					case 0, 1:
						done(errDown)
					case 2:
						done(context.Canceled)
					default:
						done(nil)
					}
				}
			}()
		}
		mover.Add(1)
		go func() {
			defer mover.Done()
			for {
				select {
				case <-stop:
					return
				default:
					fc.Advance(7 * time.Millisecond)
					_ = b.Counts()
					runtime.Gosched()
				}
			}
		}()
		callers.Wait()
		close(stop)
		mover.Wait()
		if changes.Load() == 0 {
			t.Fatalf("%+v: no state change under random failures", cfg.Window)
		}
		// Whatever state the run ended in, a half-open breaker must now
		// have both probe slots free.
		for b.State() != HalfOpen {
			if b.State() == Closed {
				for b.State() == Closed {
					mustCall(t, b, errDown)
				}
				continue
			}
			fc.Advance(time.Second)
		}
		d1, err1 := b.Allow()
		d2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("half-open after chaos admitted %v, %v: a probe slot leaked", err1, err2)
		}
		d1(nil)
		d2(nil)
		wantState(t, b, Closed)
	}
}

// TestProbingOnRealClock trips and probes a breaker on the real clock from
// many goroutines, then closes it while probes may be due or running: no
// race, no leaked goroutine (goleak checks), no probe after Close.
func TestProbingOnRealClock(t *testing.T) {
	var probes, afterClose atomic.Int64
	var closed atomic.Bool
	b := New(Config{
		ConsecutiveFailures: 2,
		OpenTimeout:         200 * time.Microsecond,
		MaxOpenTimeout:      time.Millisecond,
		ProbeOffset:         50 * time.Microsecond,
		Probe: func(ctx context.Context) error {
			if closed.Load() {
				afterClose.Add(1)
			}
			if probes.Add(1)%3 == 0 {
				return errDown
			}
			return nil
		},
	})
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; probes.Load() < 20 && time.Now().Before(deadline); i++ {
				_, err := Do(context.Background(), b, func(context.Context) (int, error) {
					if (g+i)%3 == 0 {
						return 0, nil
					}
					return 0, errDown
				})
				if err == ErrOpen || err == ErrTooManyProbes {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	b.Close()
	closed.Store(true)
	if n := afterClose.Load(); n != 0 {
		t.Fatalf("%d probes ran after Close returned", n)
	}
	if probes.Load() < 20 {
		t.Logf("only %d probes within the time limit", probes.Load())
	}
}
