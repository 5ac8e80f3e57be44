package config

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

const hedgeFile = `
policies:
  search:
    max_attempts: %s
    backoff: {strategy: constant, base: 0s}
    hedge:
      delay: 50ms
      max_hedges: 2
      adaptive: {percentile: %s, window: 10s, floor: 5ms, max: 1s, min_samples: 5}
  plain:
    max_attempts: 2
operations:
  search.query: search
  other: plain
`

func hedgeConfig(attempts, percentile string) string {
	return fmt.Sprintf(hedgeFile, attempts, percentile)
}

// TestHedgeFromFile: a policy file's hedge block reaches Handle.Hedger,
// whose Policy is the Handle; a real hedge.Do through it on the fake
// clock starts a hedge exactly at the file's delay. Reloads: a change
// elsewhere in the policy reaches the Hedger through the Handle and
// keeps the Adaptive; a change of the adaptive settings gives a new one;
// an invalid hedge block is refused with its line and the Hedger in force
// stays; a file without hedge turns hedging off.
func TestHedgeFromFile(t *testing.T) {
	clk := clocktest.NewFake()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, path, hedgeConfig("3", "0.9"))
	reg, err := Open(path, Options{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("search.query")
	hd := h.Hedger()
	if hd.Policy != retry.PolicySource(h) {
		t.Fatalf("Hedger.Policy = %v, want the Handle", hd.Policy)
	}
	if hd.Delay != 50*time.Millisecond || hd.MaxHedges != 2 || hd.Adaptive == nil {
		t.Fatalf("Hedger = %+v", hd)
	}
	if spec := h.Spec().Hedge; spec == nil || *spec.Adaptive != (hedge.AdaptiveConfig{Percentile: 0.9, Window: 10 * time.Second,
		Floor: 5 * time.Millisecond, Max: time.Second, MinSamples: 5}) {
		t.Fatalf("spec %+v", spec)
	}
	if other := reg.Policy("other").Hedger(); other.MaxHedges != hedge.NoHedges || other.Adaptive != nil {
		t.Fatalf("a policy without hedge: %+v, want NoHedges", other)
	}

	// A real call: the first attempt hangs; the hedge starts at 50ms
	// (Adaptive has no samples yet) and answers.
	started := make(chan int, 4)
	out := make(chan error, 1)
	go func() {
		v, err := hedge.Do(context.Background(), hd, func(ctx context.Context) (int, error) {
			n, _, _ := hedge.AttemptOf(ctx)
			started <- n
			if n == 1 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return n, nil
		}, nil)
		if err == nil && v != 2 {
			err = fmt.Errorf("Do = %d, want 2", v)
		}
		out <- err
	}()
	wait := func(want int) {
		t.Helper()
		select {
		case n := <-started:
			if n != want {
				t.Fatalf("attempt %d started, want %d", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d did not start", want)
		}
	}
	wait(1)
	clk.BlockUntil(1)
	clk.Advance(50*time.Millisecond - time.Nanosecond)
	select {
	case n := <-started:
		t.Fatalf("attempt %d started before the delay", n)
	default:
	}
	clk.Advance(time.Nanosecond)
	wait(2)
	select {
	case err := <-out:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
	}

	// A reload that changes max_attempts only: the Handle gives the new
	// limit, the Adaptive is kept.
	ad := hd.Adaptive
	writeFile(t, path, hedgeConfig("4", "0.9"))
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if got := h.Hedger(); got.Adaptive != ad || got.Policy.Policy().MaxAttempts != 4 {
		t.Fatalf("after an unrelated change: Adaptive kept %v, max_attempts %d", got.Adaptive == ad, got.Policy.Policy().MaxAttempts)
	}
	if hd.Policy.Policy().MaxAttempts != 4 {
		t.Fatal("a Hedger kept from before the reload does not see the new policy")
	}

	// A change of the adaptive settings: a new Adaptive.
	writeFile(t, path, hedgeConfig("4", "0.99"))
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	ad2 := h.Hedger().Adaptive
	if ad2 == nil || ad2 == ad {
		t.Fatal("changed adaptive settings kept the old Adaptive")
	}

	// An invalid hedge: refused with its line, the Hedger in force stays.
	writeFile(t, path, hedgeConfig("2", "0.99")) // max_hedges 2 does not fit in 2 attempts
	err = reg.Reload(path)
	if err == nil || !strings.Contains(err.Error(), "policies.yaml:8: policies.search.hedge.max_hedges: 2 hedges do not fit in max_attempts 2") {
		t.Fatalf("Reload = %v, want the max_hedges problem on line 8", err)
	}
	if got := h.Hedger(); got.Adaptive != ad2 || got.MaxHedges != 2 || h.Policy().MaxAttempts != 4 {
		t.Fatalf("after a refused file: %+v", got)
	}

	// No hedge block: hedging off.
	writeFile(t, path, "policies:\n  search: {max_attempts: 3}\noperations:\n  search.query: search\n  other: search\n")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if got := h.Hedger(); got.MaxHedges != hedge.NoHedges || got.Adaptive != nil || got.Policy != retry.PolicySource(h) {
		t.Fatalf("without hedge: %+v", got)
	}
}

// TestHedgeDefaults: with adaptive alone the delay is left to the hedge
// package (DefaultDelay until enough samples) and max_hedges is 1; an
// unlimited policy takes any max_hedges up to the bound.
func TestHedgeDefaults(t *testing.T) {
	f := mustParse(t, "policies:\n  a: {hedge: {adaptive: {}}}\n  b: {max_attempts: unlimited, hedge: {delay: 1ms, max_hedges: 100}}\n")
	a := f.Policies["a"].Hedge
	if a == nil || a.Delay != 0 || a.MaxHedges != hedge.DefaultMaxHedges || a.Adaptive == nil || *a.Adaptive != (hedge.AdaptiveConfig{}) {
		t.Fatalf("a: %+v", a)
	}
	if b := f.Policies["b"].Hedge; b.MaxHedges != 100 || b.Adaptive != nil {
		t.Fatalf("b: %+v", b)
	}
	if h := (&Handle{}).Hedger(); h.MaxHedges != hedge.NoHedges {
		t.Fatalf("a Handle without a Registry: %+v", h)
	}
}
