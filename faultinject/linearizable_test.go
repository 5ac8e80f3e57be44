package faultinject

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// yieldingClock is the real clock, but it yields the processor whenever it
// is read, which widens the windows between a request's reading of the
// rules and its step in the limiter: the interleavings the test is after.
type yieldingClock struct{}

func (yieldingClock) Now() time.Time { runtime.Gosched(); return clock.Real.Now() }
func (yieldingClock) Since(t time.Time) time.Duration {
	runtime.Gosched()
	return clock.Real.Since(t)
}
func (yieldingClock) NewTimer(d time.Duration) clock.Timer { return clock.Real.NewTimer(d) }
func (yieldingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d, f)
}

// rulesWith returns rules with lim and an outage window that never comes
// (checking it reads the clock).
func rulesWith(lim Limit) Rules {
	return Rules{Limit: lim, Outages: []Window{{Start: 1000 * time.Hour, End: 1001 * time.Hour}}}
}

// TestLimitInForceAtEveryAdmission is a model-based concurrent test of the
// limiter against the rules: requests arrive and finish on several
// goroutines while two others replace the Limit concurrently, and at every
// admission (checked inside the limiter's step, through its test hook) the
// in-flight count that includes the newcomer must not exceed the
// Concurrency of the rules in force at that very moment — the rules that
// Injector.Rules would return. A lowered limit may leave more running than
// it allows, but it admits no one until they are below it.
//
// Afterwards the model's sums must hold: every request settled exactly
// once, nothing in flight or waiting.
func TestLimitInForceAtEveryAdmission(t *testing.T) {
	const (
		rounds     = 4
		workers    = 4
		perWorker  = 300
		updaters   = 2
		perUpdater = 300
	)
	for round := range rounds {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			in := New(Config{Seed: uint64(round), Clock: yieldingClock{}, Rules: rulesWith(Limit{Concurrency: 1, Queue: 4})})
			defer in.Close()
			var admissions, violations atomic.Int64
			var firstViolation atomic.Pointer[string]
			in.lim.onTake = func(n int) { // runs with the limiter's mutex held
				admissions.Add(1)
				if c := in.state.Load().rules.Limit.Concurrency; c > 0 && n > c {
					violations.Add(1)
					msg := fmt.Sprintf("admitted with %d running while the limit in force is %d", n, c)
					firstViolation.CompareAndSwap(nil, &msg)
				}
			}
			rt := in.Transport(rtFunc(func(*http.Request) (*http.Response, error) {
				runtime.Gosched() // hold the slot a little, so that slots change hands under Updates
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // bounds the load in time
			defer cancel()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range perWorker {
						if ctx.Err() != nil {
							return
						}
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
						if resp, err := rt.RoundTrip(req); err == nil {
							_ = resp.Body.Close()
						}
					}
				})
			}
			for u := range updaters {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(u)))
				wg.Go(func() {
					for range perUpdater {
						lim := Limit{Concurrency: 1 + rng.IntN(6), Queue: rng.IntN(5)}
						if rng.IntN(8) == 0 {
							lim.Concurrency = 0 // no limit for a while
						}
						if err := in.Update(rulesWith(lim)); err != nil {
							t.Error(err)
						}
						runtime.Gosched()
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatal("the load did not finish in time")
			}
			if p := firstViolation.Load(); p != nil {
				t.Fatalf("%d of %d admissions beyond the limit in force; first: %s", violations.Load(), admissions.Load(), *p)
			}
			c := in.Snapshot()
			if c.Requests != workers*perWorker || c.Settled() != c.Requests || c.InFlight != 0 || c.Waiting != 0 ||
				c.Passed != uint64(admissions.Load()) {
				t.Fatalf("admissions %d, counters %+v", admissions.Load(), c)
			}
		})
	}
}
