package faultinject_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/faultinject"
	"pgregory.net/rapid"
)

// instantClock is a clock.Clock whose timers have already fired: every wait
// ends at once, and the requested durations are recorded. Its time does
// not move, so outage windows never change.
type instantClock struct {
	mu     sync.Mutex
	waits  []time.Duration
	origin time.Time
}

func (c *instantClock) Now() time.Time                  { return c.origin }
func (c *instantClock) Since(t time.Time) time.Duration { return c.origin.Sub(t) }
func (c *instantClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- c.origin
	return firedTimer{ch}
}
func (c *instantClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	panic("not used")
}

type firedTimer struct{ ch chan time.Time }

func (f firedTimer) C() <-chan time.Time      { return f.ch }
func (f firedTimer) Stop() bool               { return false }
func (f firedTimer) Reset(time.Duration) bool { return false }

// run sends n requests, one after another, through an Injector's client
// side and returns the final action of each and the latencies it waited.
func run(t *rapid.T, seed uint64, rules faultinject.Rules, n int) ([]faultinject.Action, []time.Duration, faultinject.Counters) {
	clk := &instantClock{origin: time.Unix(1e9, 0)}
	var actions []faultinject.Action
	var cancel context.CancelFunc
	in := faultinject.New(faultinject.Config{Seed: seed, Rules: rules, Clock: clk, OnEvent: func(e faultinject.Event) {
		actions = append(actions, e.Action)
		if e.Action == faultinject.Hang {
			cancel() // the caller gives up at once
		}
	}})
	rt := in.Transport(&countingRT{})
	for range n {
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		cancel()
	}
	return actions, clk.waits, in.Snapshot()
}

func drawRules(t *rapid.T) faultinject.Rules {
	pct := func(label string, max float64) float64 {
		if rapid.Bool().Draw(t, label+"?") {
			return 0
		}
		return rapid.Float64Range(0, max).Draw(t, label)
	}
	var r faultinject.Rules
	r.ResetPercent = pct("reset", 100)
	r.HangPercent = pct("hang", 100-r.ResetPercent)
	r.Abort.Percent = pct("abort", 100-r.ResetPercent-r.HangPercent)
	r.Latency = time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "latency"))
	r.Jitter = time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "jitter"))
	return r
}

// TestDecisionsAreReproducibleAndAccounted: the same seed, rules and
// request order give the same actions and delays; every request is counted
// once; delays stay within [Latency, Latency+Jitter]; a fault with 0% never
// happens.
func TestDecisionsAreReproducibleAndAccounted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rules := drawRules(t)
		if err := rules.Validate(); err != nil {
			t.Skip(err) // rounding pushed the sum over 100
		}
		seed := rapid.Uint64().Draw(t, "seed")
		n := rapid.IntRange(1, 200).Draw(t, "requests")
		a1, d1, c := run(t, seed, rules, n)
		a2, d2, _ := run(t, seed, rules, n)
		if !slices.Equal(a1, a2) || !slices.Equal(d1, d2) {
			t.Fatal("the same seed gave different decisions")
		}
		if len(a1) != n || c.Requests != uint64(n) || c.Settled() != c.Requests || c.InFlight != 0 {
			t.Fatalf("%d events for %d requests; counters %+v", len(a1), n, c)
		}
		count := map[faultinject.Action]uint64{}
		for _, a := range a1 {
			count[a]++
		}
		if count[faultinject.Pass] != c.Passed || count[faultinject.Abort] != c.Aborted ||
			count[faultinject.Reset] != c.Resets || count[faultinject.Hang] != c.Hangs {
			t.Fatalf("events %v disagree with counters %+v", count, c)
		}
		for pct, a := range map[*float64]faultinject.Action{&rules.ResetPercent: faultinject.Reset, &rules.HangPercent: faultinject.Hang, &rules.Abort.Percent: faultinject.Abort} {
			if *pct == 0 && count[a] > 0 {
				t.Fatalf("%v happened %d times at 0%%", a, count[a])
			}
			if *pct == 100 && count[a] != uint64(n) {
				t.Fatalf("%v happened %d of %d times at 100%%", a, count[a], n)
			}
		}
		var total time.Duration
		for _, d := range d1 {
			if d < rules.Latency || d > rules.Latency+rules.Jitter || d == 0 {
				t.Fatalf("delay %v outside [%v, %v]", d, rules.Latency, rules.Latency+rules.Jitter)
			}
			total += d
		}
		if c.DelayTotal != total || c.Delayed != uint64(len(d1)) {
			t.Fatalf("DelayTotal %v, Delayed %d; waits %v", c.DelayTotal, c.Delayed, d1)
		}
	})
}

// TestConcurrentUpdatesAndTraffic hammers one Injector from several
// goroutines while the rules change, for the race detector; the load is
// bounded in count.
func TestConcurrentUpdatesAndTraffic(t *testing.T) {
	clk := &instantClock{origin: time.Unix(1e9, 0)}
	in := faultinject.New(faultinject.Config{Clock: clk, Seed: 1})
	rt := in.Transport(&countingRT{})
	rules := []faultinject.Rules{
		{},
		{Abort: faultinject.AbortRule{Percent: 50}, ResetPercent: 10},
		{Latency: time.Millisecond, Jitter: time.Millisecond, Limit: faultinject.Limit{Concurrency: 2, Queue: 2}},
		{Outages: []faultinject.Window{{End: time.Hour}}},
	}
	const workers, perWorker = 4, 250
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout) // bounds the load in time too
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
	wg.Go(func() {
		for i := range 200 {
			if err := in.Update(rules[i%len(rules)]); err != nil {
				t.Error(err)
			}
			_ = in.Snapshot()
		}
	})
	wg.Wait()
	c := in.Snapshot()
	if c.Requests != workers*perWorker || c.Settled() != c.Requests || c.InFlight != 0 || c.Waiting != 0 {
		t.Fatalf("counters %+v", c)
	}
}
