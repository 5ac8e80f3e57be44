package promretry_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// tally counts the events an observer receives, as the metrics should.
type tally struct {
	retry.NopObserver
	mu       sync.Mutex
	attempts map[[2]string]float64 // {kind, outcome}
	calls    map[string]float64    // reason
	made     int                   // sum of CallEnd.Attempts
	n        int                   // calls
}

func (t *tally) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	kind := "first"
	if e.Retry() {
		kind = "retry"
	}
	t.mu.Lock()
	t.attempts[[2]string{kind, e.Outcome.String()}]++
	t.mu.Unlock()
}

func (t *tally) CallEnd(_ context.Context, e retry.CallEnd) {
	t.mu.Lock()
	t.calls[e.Reason.String()]++
	t.made += e.Attempts
	t.n++
	t.mu.Unlock()
}

// scriptBudget grants retries as drawn.
type scriptBudget struct{ grants []bool }

func (b *scriptBudget) Record(bool, error) {}
func (b *scriptBudget) Withdraw(error) bool {
	if len(b.grants) == 0 {
		return true
	}
	g := b.grants[0]
	b.grants = b.grants[1:]
	return g
}

// scriptBreaker admits attempts as drawn.
type scriptBreaker struct{ admits []bool }

func (b *scriptBreaker) Ready() error { return nil }
func (b *scriptBreaker) Allow() (func(error), error) {
	if len(b.admits) == 0 || b.admits[0] {
		if len(b.admits) > 0 {
			b.admits = b.admits[1:]
		}
		return func(error) {}, nil
	}
	return nil, errOpen
}

// TestCollectorMatchesEvents: whatever mix of outcomes, budget and breaker
// refusals, concurrent calls produce metrics equal to the events' tallies,
// every attempt is counted once, and retries_active returns to zero.
func TestCollectorMatchesEvents(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		type callScript struct {
			results []int // 0 success, 1 transient, 2 permanent, per attempt
			maxAtt  int
			grants  []bool
			admits  []bool
		}
		calls := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) callScript {
			return callScript{
				results: rapid.SliceOfN(rapid.IntRange(0, 2), 0, 6).Draw(rt, "results"),
				maxAtt:  rapid.IntRange(0, 5).Draw(rt, "maxAttempts"),
				grants:  rapid.SliceOfN(rapid.Bool(), 0, 4).Draw(rt, "grants"),
				admits:  rapid.SliceOfN(rapid.Bool(), 0, 4).Draw(rt, "admits"),
			}
		}), 1, 30).Draw(rt, "calls")
		workers := rapid.IntRange(1, 4).Draw(rt, "workers")

		c := promretry.New(promretry.Config{})
		reg := registry(rt, c)
		tl := &tally{attempts: map[[2]string]float64{}, calls: map[string]float64{}}
		obs := retry.Multi(c, tl)

		var wg sync.WaitGroup
		next := make(chan callScript)
		for range workers {
			wg.Go(func() {
				for cs := range next {
					p := &retry.Policy{
						Operation:   "op",
						MaxAttempts: cs.maxAtt,
						Backoff:     backoff.Constant{},
						Budget:      &scriptBudget{grants: cs.grants},
						Breaker:     &scriptBreaker{admits: cs.admits},
						Observer:    obs,
					}
					i := 0
					_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) {
						r := 0
						if i < len(cs.results) {
							r = cs.results[i]
						}
						i++
						switch r {
						case 1:
							return 0, errTransient
						case 2:
							return 0, retry.Permanent(errors.New("permanent"))
						}
						return i, nil
					})
				}
			})
		}
		for _, cs := range calls {
			next <- cs
		}
		close(next)
		wg.Wait()

		total := 0.0
		for _, kind := range []string{"first", "retry"} {
			for _, outcome := range []string{"success", "error", "permanent_error", "timeout", "canceled"} {
				want := tl.attempts[[2]string{kind, outcome}]
				got := value(rt, reg, "stormguard_attempts_total", "operation", "op", "attempt_kind", kind, "outcome", outcome)
				if got != want {
					rt.Fatalf("attempts_total{%s,%s} = %v, want %v", kind, outcome, got, want)
				}
				total += got
			}
		}
		if total != float64(tl.made) {
			rt.Fatalf("attempts counted %v, calls report %d attempts", total, tl.made)
		}
		for _, reason := range allReasons() {
			if got, want := value(rt, reg, "stormguard_calls_total", "operation", "op", "outcome", reason), tl.calls[reason]; got != want {
				rt.Fatalf("calls_total{%s} = %v, want %v", reason, got, want)
			}
		}
		if got := value(rt, reg, "stormguard_retry_budget_exhausted_total", "operation", "op"); got != tl.calls["budget"] {
			rt.Fatalf("retry_budget_exhausted_total = %v, want %v", got, tl.calls["budget"])
		}
		if got := value(rt, reg, "stormguard_call_duration_seconds", "operation", "op"); got != float64(len(calls)) {
			rt.Fatalf("call_duration_seconds count = %v, want %d", got, len(calls))
		}
		if got := value(rt, reg, "stormguard_retries_active", "operation", "op"); got != 0 {
			rt.Fatalf("retries_active = %v after every call returned", got)
		}
	})
}
