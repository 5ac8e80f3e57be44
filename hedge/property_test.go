package hedge_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

type outcome uint8

const (
	ok outcome = iota
	fail
	fatal
)

// lockedBreaker counts Allow and done calls.
type lockedBreaker struct{ allows, dones atomic.Int32 }

func (b *lockedBreaker) Allow() (func(error), error) {
	b.allows.Add(1)
	return func(error) { b.dones.Add(1) }, nil
}
func (b *lockedBreaker) Ready() error { return nil }

// For any mix of answers, latencies, hedge and attempt limits: attempts
// (first, hedges, retries) never exceed MaxAttempts, hedges never exceed
// MaxHedges per call, the concurrency budget and the breaker balance,
// and every value an attempt returned is either returned by Do or
// released, exactly once.
func TestPropertyLimitsAndReleases(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 6).Draw(rt, "maxAttempts")
		maxHedges := rapid.IntRange(1, 4).Draw(rt, "maxHedges")
		n := rapid.IntRange(1, 8).Draw(rt, "attempts")
		outs := rapid.SliceOfN(rapid.SampledFrom([]outcome{ok, fail, fail, fatal}), n, n).Draw(rt, "outcomes")
		lats := rapid.SliceOfN(rapid.IntRange(0, 40), n, n).Draw(rt, "latenciesMs")

		clk := clocktest.NewFake()
		cb := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: 0.5, MinConcurrency: 1})
		br := new(lockedBreaker)
		ev := new(events)
		h := &hedge.Hedger{
			Policy: &retry.Policy{
				MaxAttempts: limit, Backoff: backoff.Constant{Interval: 5 * time.Millisecond},
				Clock: clk, Budget: cb, Breaker: br, Observer: ev,
			},
			Delay: 10 * time.Millisecond, MaxHedges: maxHedges,
		}
		var mu sync.Mutex
		var produced, released []int
		var attempts atomic.Int32
		errFatal := retry.Permanent(errors.New("fatal"))
		op := func(ctx context.Context) (int, error) {
			k := int(attempts.Add(1))
			i := min(k, n) - 1
			mu.Lock()
			produced = append(produced, k)
			mu.Unlock()
			tm := clk.NewTimer(time.Duration(lats[i]) * time.Millisecond)
			select {
			case <-tm.C():
			case <-ctx.Done():
				tm.Stop()
				return k, ctx.Err()
			}
			switch outs[i] {
			case fail:
				return k, errors.New("transient")
			case fatal:
				return k, errFatal
			}
			return k, nil
		}
		release := func(v int) {
			mu.Lock()
			released = append(released, v)
			mu.Unlock()
		}
		type res struct {
			v   int
			err error
		}
		done := make(chan res, 1)
		go func() {
			v, err := hedge.Do(context.Background(), h, op, release)
			done <- res{v, err}
		}()
		var r res
	drive:
		for i := 0; ; i++ {
			select {
			case r = <-done:
				break drive
			default:
			}
			if i > 1_000_000 {
				rt.Fatalf("Do did not return; events %s", ev)
			}
			clk.Advance(time.Millisecond)
			runtime.Gosched()
		}
		if got := int(attempts.Load()); got > limit {
			rt.Fatalf("%d attempts, limit %d", got, limit)
		}
		if hedges := countOf(ev.String(), "hedge#"); hedges > maxHedges {
			rt.Fatalf("%d hedges, MaxHedges %d", hedges, maxHedges)
		}
		if req, ret := cb.Active(); req != 0 || ret != 0 {
			rt.Fatalf("concurrency budget: %d requests, %d retries active", req, ret)
		}
		if a, d := br.allows.Load(), br.dones.Load(); a != d || int(a) != int(attempts.Load()) {
			rt.Fatalf("breaker: %d allows, %d dones, %d attempts", a, d, attempts.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		all := append(slices.Clone(released), r.v)
		slices.Sort(all)
		slices.Sort(produced)
		if !slices.Equal(all, produced) {
			rt.Fatalf("produced %v; released %v and returned %d", produced, released, r.v)
		}
		if (r.err == nil) != slices.Contains(outs[:min(int(attempts.Load()), n)], ok) && r.err == nil {
			rt.Fatalf("success %d without an ok answer", r.v)
		}
	})
}

func countOf(s, sub string) int {
	c := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			c++
		}
	}
	return c
}
