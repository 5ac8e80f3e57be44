package promretry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// copies is a hedged operation whose attempts each wait for the test's
// answer (or their context): attempt n reads answer[n].
type copies struct {
	mu      sync.Mutex
	n       int
	started chan int
	answer  [8]chan error
}

func newCopies() *copies {
	s := &copies{started: make(chan int, 8)}
	for i := range s.answer {
		s.answer[i] = make(chan error, 1)
	}
	return s
}

func (s *copies) op(ctx context.Context) (int, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	s.started <- n
	select {
	case err := <-s.answer[n]:
		return n, err
	case <-ctx.Done():
		return n, ctx.Err()
	}
}

func (s *copies) await(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-s.started:
		if got != n {
			t.Fatalf("attempt %d started, want %d", got, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("attempt %d did not start", n)
	}
}

// TestRetriesActiveHedgedFirstAttemptWins is the regression test of issue
// 32 item 1: a hedged call makes two attempts, and whichever copy wins
// (the first attempt, the hedge, the first after the hedge failed, both
// answering together, or a retry after both failed), the gauge comes back
// to zero and never reads below zero; a call waiting for its retry after
// a failed hedged round is counted.
func TestRetriesActiveHedgedFirstAttemptWins(t *testing.T) {
	c := promretry.New(promretry.Config{Operations: []string{"op"}})
	reg := registry(t, c)
	active := func() float64 { return value(t, reg, "stormguard_retries_active", "operation", "op") }
	clk := clocktest.NewFake()
	const delay = 50 * time.Millisecond
	h := &hedge.Hedger{
		Policy: &retry.Policy{Operation: "op", MaxAttempts: 4, Backoff: backoff.Constant{Interval: 10 * time.Second}, Clock: clk, Observer: c},
		Delay:  delay,
	}
	// hedged runs one call up to its hedge, then lets answer decide it.
	hedged := func(name string, answer func(s *copies)) {
		t.Helper()
		s := newCopies()
		out := make(chan error, 1)
		go func() { _, err := hedge.Do(context.Background(), h, s.op, nil); out <- err }()
		s.await(t, 1)
		clk.BlockUntil(1)
		clk.Advance(delay)
		s.await(t, 2)
		answer(s)
		select {
		case err := <-out:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: hedge.Do did not return", name)
		}
		if got := active(); got != 0 {
			t.Fatalf("%s: retries_active after the call = %v, want 0", name, got)
		}
	}
	for range 3 {
		hedged("first attempt wins", func(s *copies) { s.answer[1] <- nil })
	}
	hedged("hedge wins", func(s *copies) { s.answer[2] <- nil })
	hedged("first wins after the hedge failed", func(s *copies) {
		s.answer[2] <- errTransient
		s.answer[1] <- nil
	})
	hedged("first wins after its own failure's hedge", func(s *copies) {
		s.answer[1] <- errTransient
		s.answer[2] <- nil
	})
	hedged("both answer together", func(s *copies) {
		s.answer[1] <- nil
		s.answer[2] <- nil
	})
	hedged("retry after both failed", func(s *copies) {
		s.answer[1] <- errTransient
		s.answer[2] <- errTransient
		clk.BlockUntil(1) // the call waits for its retry
		if got := active(); got != 1 {
			t.Errorf("retries_active while the call waits for its retry = %v, want 1", got)
		}
		clk.Advance(10 * time.Second)
		s.await(t, 3)
		s.answer[3] <- nil
	})
}

// TestRetriesActiveHedgedConcurrent: many hedged calls at once, on the
// real clock with a tiny delay, both copies answering together: the gauge
// never reads below zero while they run and is zero after.
func TestRetriesActiveHedgedConcurrent(t *testing.T) {
	c := promretry.New(promretry.Config{Operations: []string{"op"}})
	reg := registry(t, c)
	active := func() float64 { return value(t, reg, "stormguard_retries_active", "operation", "op") }
	h := &hedge.Hedger{
		Policy: &retry.Policy{Operation: "op", MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: c},
		Delay:  time.Nanosecond,
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var low float64
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			low = min(low, active())
		}
	}()
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				gate := make(chan struct{})
				var once sync.Once
				var n int
				var mu sync.Mutex
				_, _ = hedge.Do(context.Background(), h, func(ctx context.Context) (int, error) {
					mu.Lock()
					n++
					k := n
					mu.Unlock()
					if k == 2 {
						once.Do(func() { close(gate) })
					}
					select { // both copies answer as soon as the hedge started
					case <-gate:
					case <-ctx.Done():
					}
					if (g+i)%3 == 0 && k == 1 {
						return 0, errTransient
					}
					return k, nil
				}, nil)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-scraped
	if low < 0 {
		t.Errorf("retries_active read %v while hedged calls ran, want never below 0", low)
	}
	if got := active(); got != 0 {
		t.Errorf("retries_active after every call = %v, want 0", got)
	}
}
