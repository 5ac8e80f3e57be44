package hedge

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// tickStopper is a Budget whose Withdraw, which the timer goroutine calls
// before hedgeLocked re-arms the call's timer for the next hedge, stops
// every shard's tick, so that the re-armed coarse entry stays listed.
type tickStopper struct{}

func (tickStopper) Record(bool, error) {}
func (tickStopper) Withdraw(error) bool {
	for i := range timerShards {
		s := &timerShards[i]
		s.mu.Lock()
		if s.tick != nil {
			s.tick.Stop()
		}
		s.tickArmed = true // Reset does not restart it
		s.mu.Unlock()
	}
	return true
}

func restartTicks() {
	for i := range timerShards {
		s := &timerShards[i]
		s.mu.Lock()
		if s.tick != nil {
			s.tick.Reset(tickPeriod)
		} else {
			s.tickArmed = false
		}
		s.mu.Unlock()
	}
}

func anyListed() bool {
	for i := range timerShards {
		s := &timerShards[i]
		s.mu.Lock()
		for t := s.list.next; t != nil && t != &s.list; t = t.next {
			if t.state.Load() == tListed {
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
	}
	return false
}

// TestFirstAnswersWhileNextHedgeListed: with MaxHedges 2 on the real
// clock and a coarse delay, a first attempt that answers after hedge 1
// started, while the timer re-armed for hedge 2 is still listed, does not
// make Do return as if no hedge ran: hedge 1's context is cancelled before
// Do returns (a review found Do returning with it still running, and its
// pooled call reused by later callers).
func TestFirstAnswersWhileNextHedgeListed(t *testing.T) {
	defer restartTicks()
	h := &Hedger{Policy: &retry.Policy{Budget: tickStopper{}}, Delay: 20 * time.Millisecond, MaxHedges: 2}
	started := make(chan struct{})
	var hedgeReturned, listed atomic.Bool
	v, err := Do(context.Background(), h, func(ctx context.Context) (string, error) {
		if n, _, _ := AttemptOf(ctx); n == 1 {
			<-started
			for dl := time.Now().Add(5 * time.Second); time.Now().Before(dl); runtime.Gosched() {
				if anyListed() {
					listed.Store(true)
					break
				}
			}
			return "first", nil
		}
		close(started)
		<-ctx.Done()
		hedgeReturned.Store(true)
		return "", ctx.Err()
	}, nil)
	if !listed.Load() {
		t.Fatal("setup: the re-armed entry was never seen listed")
	}
	if v != "first" || err != nil {
		t.Fatalf("Do = %q, %v", v, err)
	}
	if !hedgeReturned.Load() {
		t.Fatal("Do returned while its hedge still ran (its context never cancelled)")
	}
}
