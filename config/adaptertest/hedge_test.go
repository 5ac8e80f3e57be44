package adaptertest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// Both adapters hear hedges.
var (
	_ hedge.Observer = (*promretry.Collector)(nil)
	_ hedge.Observer = (*otelretry.Observer)(nil)
)

// TestHedgeEventsReachBothAdaptersInMulti: with retry.Multi(promretry,
// otelretry) as the Policy's Observer, a real hedge.Do on a fake clock
// (a hedge exactly at the delay, which wins) is counted by both, under
// the same names and labels.
func TestHedgeEventsReachBothAdaptersInMulti(t *testing.T) {
	coll, obs, regs := adapters(t)
	clk := clocktest.NewFake()
	p := &retry.Policy{Operation: "search", MaxAttempts: 3, Clock: clk, Observer: retry.Multi(coll, obs)}
	hedgeWins(t, &hedge.Hedger{Policy: p, Delay: 20 * time.Millisecond}, clk, 20*time.Millisecond)
	checkHedges(t, regs, "search", 1)
}

// TestHedgerFromFileReachesBothAdapters: the Hedger of a handle whose
// policy file has a hedge block, with retry.Multi(promretry, otelretry)
// as config.Options.Observer, hedges at the file's delay, and both
// adapters count it; after a reload that changes the delay, the next
// call's hedge comes at the new one and the counters go on.
func TestHedgerFromFileReachesBothAdapters(t *testing.T) {
	coll, obs, regs := adapters(t)
	clk := clocktest.NewFake()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	const file = "policies:\n  search:\n    max_attempts: 3\n    hedge: {delay: %s}\noperations:\n  search.query: search\n"
	write(t, path, fmt.Sprintf(file, "30ms"))
	reg, err := config.Open(path, config.Options{Clock: clk, Observer: retry.Multi(coll, obs)})
	if err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("search.query")
	hedgeWins(t, h.Hedger(), clk, 30*time.Millisecond)
	checkHedges(t, regs, "search.query", 1)
	write(t, path, fmt.Sprintf(file, "70ms"))
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	hedgeWins(t, h.Hedger(), clk, 70*time.Millisecond)
	checkHedges(t, regs, "search.query", 2)
}

// hedgeWins runs one hedge.Do whose first attempt hangs until it loses
// and whose hedge, which must start exactly at delay on clk, answers.
func hedgeWins(t *testing.T, h *hedge.Hedger, clk *clocktest.Fake, delay time.Duration) {
	t.Helper()
	started := make(chan int, 4)
	op := func(ctx context.Context) (int, error) {
		n, _, _ := hedge.AttemptOf(ctx)
		started <- n
		if n == 1 {
			<-ctx.Done()
			return 1, ctx.Err()
		}
		return n, nil
	}
	out := make(chan error, 1)
	go func() {
		v, err := hedge.Do(context.Background(), h, op, nil)
		if err == nil && v != 2 {
			err = fmt.Errorf("Do = %d, want the hedge's 2", v)
		}
		out <- err
	}()
	waitStart := func(want int) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("attempt %d started, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d did not start", want)
		}
	}
	waitStart(1)
	clk.BlockUntil(1)
	clk.Advance(delay - time.Nanosecond)
	select {
	case n := <-started:
		t.Fatalf("attempt %d started before the delay %v", n, delay)
	default:
	}
	clk.Advance(time.Nanosecond)
	waitStart(2)
	select {
	case err := <-out:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
	}
}

func checkHedges(t *testing.T, regs map[string]*prometheus.Registry, op string, want float64) {
	t.Helper()
	for name, reg := range regs {
		got := series(t, reg, "stormguard_hedges_total")
		for _, r := range []string{"started", "won", "first_cancelled"} {
			if v := got["operation="+op+",result="+r]; v != want {
				t.Errorf("%s: stormguard_hedges_total{operation=%q,result=%q} = %v, want %v (series %v)", name, op, r, v, want, got)
			}
		}
	}
}

// TestAdaptiveHedgeDelayFromFileReachesBothAdapters: a policy file's
// adaptive hedge delay is exported by both adapters when they are
// config.Options.Observer, as its budgets and breakers are (it was never
// handed to them: the file form lacked what WatchAdaptive gives in code).
// A reload that makes it per key replaces the one delay by the per-key
// metrics, and the first one's series goes away.
func TestAdaptiveHedgeDelayFromFileReachesBothAdapters(t *testing.T) {
	coll, obs, regs := adapters(t)
	clk := clocktest.NewFake()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	const one = "policies:\n  search:\n    max_attempts: 3\n    hedge: {delay: 50ms, adaptive: {min_samples: 5}}\noperations:\n  search.query: search\n"
	const perKey = "policies:\n  search:\n    max_attempts: 3\n    hedge: {delay: 50ms, adaptive: {min_samples: 5}, per: host}\noperations:\n  search.query: search\n"
	write(t, path, one)
	reg, err := config.Open(path, config.Options{Clock: clk, Observer: retry.Multi(coll, obs)})
	if err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("search.query")
	a := h.Hedger().Adaptive
	if a == nil {
		t.Fatal("the file's hedge block has no Adaptive")
	}
	for range 10 {
		a.Observe(20 * time.Millisecond)
	}
	for name, r := range regs {
		if got := series(t, r, "stormguard_hedges_delay_seconds"); len(got) != 1 || got["operation=search.query"] <= 0 {
			t.Fatalf("%s: stormguard_hedges_delay_seconds = %v, want one series for search.query", name, got)
		}
	}
	write(t, path, perKey)
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	g := h.Hedger().Adaptives
	if g == nil {
		t.Fatal("after the reload the hedge block has no per-key delays")
	}
	m := g.Get("https://a:443")
	for range 10 {
		m.Observe(20 * time.Millisecond)
	}
	for name, r := range regs {
		if got := series(t, r, "stormguard_hedges_delay_seconds"); len(got) != 0 {
			t.Fatalf("%s: the replaced Adaptive is still exported: %v", name, got)
		}
		if got := series(t, r, "stormguard_hedges_group_delay_keys"); got["operation=search.query"] != 1 {
			t.Fatalf("%s: stormguard_hedges_group_delay_keys = %v, want 1 for search.query", name, got)
		}
	}
}
