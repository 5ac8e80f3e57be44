package budget_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stormguard/stormguard/budget"
)

// TestRatioLinearizable records histories of concurrent calls on one Ratio
// and checks with porcupine that each is linearizable against the
// sequential rule of the bucket: every Record and Withdraw takes effect at
// one instant between its call and its return, whatever the leases did.
//
// The goroutines call as goroutines of random cells (so that cells are
// shared and leases contended), while another goroutine lends the balance
// out, hands cells leases of random sizes and takes them back. The bucket
// is small, so the calls keep reaching its limits, where the lender must
// take every lease back to decide.
func TestRatioLinearizable(t *testing.T) {
	configs := map[string]budget.RatioConfig{
		"retry cost": {MaxTokens: 30, InitialTokens: 15, Refill: 1, RetryRefill: 0.5,
			RefundRetrySuccess: true, RetryCost: 2, TimeoutCost: 3},
		"failure cost, threshold": {MaxTokens: 30, InitialTokens: 20, Refill: 0.5,
			RetryRefill: 0.5, FailureCost: 1, Threshold: 10},
		"both": {MaxTokens: 12, InitialTokens: 6, Refill: 1, RetryCost: 1, FailureCost: 1, Threshold: 3},
	}
	const (
		histories  = 40
		goroutines = 4
		calls      = 60
	)
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			m := newRatioModel(cfg)
			model := ratioPorcupineModel(m)
			for h := range histories {
				rng := rand.New(rand.NewPCG(uint64(h), 7))
				r := budget.NewRatio(cfg)
				if h%2 == 0 {
					budget.Lend(r)
				}
				history := runRatioHistory(r, m, rng.Uint64(), goroutines, calls)
				res, info := porcupine.CheckOperationsVerbose(model, history, 10*time.Second)
				if res == porcupine.Illegal {
					path := t.TempDir() + "/history.html"
					_ = porcupine.VisualizePath(model, info, path)
					t.Fatalf("history %d is not linearizable (visualization: %s)", h, path)
				}
				if res != porcupine.Ok {
					t.Fatalf("history %d: check %v", h, res)
				}
			}
		})
	}
}

// ratioInput is one call: a Record with the given delta (clamped), or a
// Withdraw paying cost when the balance holds need.
type ratioInput struct {
	withdraw          bool
	delta, cost, need int64
}

func ratioPorcupineModel(m *ratioModel) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return m.tokens },
		Step: func(state, input, output any) (bool, any) {
			t, in := state.(int64), input.(ratioInput)
			if !in.withdraw {
				return true, min(max(t+in.delta, 0), m.max)
			}
			granted := t >= in.need
			if granted {
				t -= in.cost
			}
			return output.(bool) == granted, t
		},
		DescribeOperation: func(input, output any) string {
			in := input.(ratioInput)
			if in.withdraw {
				return fmt.Sprintf("withdraw(%d, need %d) = %v", in.cost, in.need, output)
			}
			return fmt.Sprintf("add(%d)", in.delta)
		},
	}
}

// runRatioHistory runs goroutines × calls random calls on r and returns
// their history, timed by a shared logical clock.
func runRatioHistory(r *budget.Ratio, m *ratioModel, seed uint64, goroutines, calls int) []porcupine.Operation {
	var (
		now     atomic.Int64
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		done    = make(chan struct{})
	)
	wg.Go(func() { // the lender's chaos
		rng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-done:
				return
			default:
			}
			switch rng.IntN(4) {
			case 0:
				budget.Lend(r)
			case 1:
				budget.Collect(r)
			default:
				budget.SetLease(r, rng.IntN(budget.RatioCells), rng.Float64(), rng.Float64())
			}
			runtime.Gosched() // leave the processors to the callers
		}
	})
	var callers sync.WaitGroup
	for g := range goroutines {
		callers.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)+2))
			for range calls {
				cell := rng.IntN(2) // two cells: goroutines share them
				var in ratioInput
				var out any
				start := now.Add(1)
				switch rng.IntN(5) {
				case 0:
					budget.RecordAt(r, cell, false, nil)
					in.delta = m.refill
				case 1:
					budget.RecordAt(r, cell, true, nil)
					in.delta = m.retryRefill
					if m.refund {
						in.delta += m.retryCost
					}
				case 2:
					budget.RecordAt(r, cell, false, errDown)
					in.delta = -m.failCost
				default:
					err := errDown
					if rng.IntN(2) == 0 {
						err = netTimeout{}
					}
					in = ratioInput{withdraw: true, cost: m.cost(err)}
					in.need = max(in.cost, m.threshold+1)
					out = budget.WithdrawAt(r, cell, err)
				}
				end := now.Add(1)
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: g, Input: in, Output: out, Call: start, Return: end})
				mu.Unlock()
			}
		})
	}
	callers.Wait()
	close(done)
	wg.Wait()
	return history
}
