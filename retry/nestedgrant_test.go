package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// TestNestedBudgetGrantGivenBackOnEveryPath abandons many NestedBudget
// grants — the main budget refuses the retry, the caller gives up during
// the wait, the breaker refuses at Begin — with a `concurrency` nested
// budget (MinConcurrency 3): each grant must be given back, so that
// retries are still granted afterwards, and the nested budget must count
// the governed attempts in flight (it hears Start).
func TestNestedBudgetGrantGivenBackOnEveryPath(t *testing.T) {
	inbound := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	paths := []struct {
		name string
		call func(t *testing.T, p *retry.Policy)
	}{
		{"main budget refuses", func(t *testing.T, p *retry.Policy) {
			p.Budget = &trackingBudget{refuse: true}
			op, _ := script(errFlaky)
			if _, err := retry.Do(inbound, p, op); !errors.Is(err, retry.ErrBudgetExhausted) {
				t.Fatalf("err %v, want the main budget's refusal", err)
			}
		}},
		{"caller gives up during the wait", func(t *testing.T, p *retry.Policy) {
			clk := clocktest.NewFake()
			p.Clock, p.Backoff = clk, backoff.Constant{Interval: time.Hour}
			ctx, cancel := context.WithCancel(inbound)
			op, _ := script(errFlaky)
			ch := async(ctx, p, op)
			clk.BlockUntil(1)
			cancel()
			if r := <-ch; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("err %v, want the caller's cancellation", r.err)
			}
		}},
		{"breaker refuses at Begin", func(t *testing.T, p *retry.Policy) {
			p.Breaker = &stubBreaker{allowErr: errOpen, openAt: 2}
			op, _ := script(errFlaky)
			if _, err := retry.Do(inbound, p, op); !errors.Is(err, errOpen) {
				t.Fatalf("err %v, want the breaker's refusal", err)
			}
		}},
		{"limiter refuses at Begin", func(t *testing.T, p *retry.Policy) {
			p.Limiter = &refusingLimiter{from: 2}
			op, _ := script(errFlaky)
			if _, err := retry.Do(inbound, p, op); !errors.Is(err, errThrottled) {
				t.Fatalf("err %v, want the limiter's refusal", err)
			}
		}},
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			nb := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 3})
			for range 10 {
				p := &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}, Nested: retry.NestedBudget, NestedBudget: nb}
				path.call(t, p)
				if req, ret := nb.Active(); req != 0 || ret != 0 {
					t.Fatalf("nested budget counts %d attempts and %d retries in flight after the call", req, ret)
				}
			}
			// A retry is still granted, and the attempts in flight are
			// counted while they run.
			var during [2]int64
			n := 0
			p := &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}, Nested: retry.NestedBudget, NestedBudget: nb}
			_, err := retry.Do(inbound, p, func(context.Context) (int, error) {
				during[n], _ = nb.Active()
				n++
				if n == 1 {
					return 0, errFlaky
				}
				return n, nil
			})
			if err != nil || n != 2 {
				t.Fatalf("after 10 abandoned grants: %d attempts, err %v; want the retry granted", n, err)
			}
			if during != [2]int64{1, 1} {
				t.Fatalf("nested budget counted %v attempts in flight during the two attempts, want [1 1] (it must hear Start)", during)
			}
		})
	}
}

// refusingLimiter admits attempts before the from-th and refuses the rest.
type refusingLimiter struct {
	from, n int
}

func (l *refusingLimiter) Acquire(context.Context, bool) (func(error), error) {
	l.n++
	if l.n >= l.from {
		return nil, errThrottled
	}
	return func(error) {}, nil
}
