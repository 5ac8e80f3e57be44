package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// One plain rand.NewPCG handed to a backoff strategy, to Policy.Rand and to
// a breaker's Config.Rand at once, as the docs allow: every draw goes
// through backoff's one lock (backoff.Uniform, backoff.Shared), so -race
// sees no data race. With a lock per package it did.
func TestOneSourceSharedByBackoffPolicyAndBreaker(t *testing.T) {
	src := rand.NewPCG(1, 2)
	advised := retry.After(errors.New("busy"), time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() { // backoff and Policy.Rand (advice jitter) draw from src
			defer wg.Done()
			p := &retry.Policy{MaxAttempts: 3, Rand: src, Clock: instantClock{},
				Backoff: backoff.Exponential{Base: time.Millisecond, Jitter: backoff.Full, Rand: src}}
			for range 200 {
				retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, advised })
			}
		}()
		go func() { // the breaker draws its open-period jitter from src
			defer wg.Done()
			fc := clocktest.NewFake()
			b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Rand: src, Clock: fc})
			for range 200 {
				if done, err := b.Allow(); err == nil {
					done(errors.New("down"))
				}
				fc.Advance(2 * time.Second)
				if done, err := b.Allow(); err == nil {
					done(nil)
				}
			}
		}()
	}
	wg.Wait()
	// Shared is idempotent and leaves safe sources alone.
	if s := backoff.Shared(src); backoff.Shared(s) != s {
		t.Error("Shared wrapped its own source again")
	}
	if n := backoff.NewSource(1); backoff.Shared(n) != n {
		t.Error("Shared wrapped a NewSource source, which needs no lock")
	}
}
