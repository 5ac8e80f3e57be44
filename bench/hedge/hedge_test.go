// Package hedge compares stormguard's hedge.Do with failsafe-go's
// hedgepolicy on identical workloads: one hedge allowed, the same delay,
// the same operation, each library used as its documentation shows with
// its policy built once.
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 6 ./hedge
package hedge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// workload is one hedging workload.
type workload struct {
	name  string
	delay time.Duration
	slow  bool // the first attempt of every call waits until cancelled
}

var workloads = []workload{
	// The first attempt answers at once: hedging's cost on the common path.
	{"AnswerBeforeDelay", time.Second, false},
	// The first attempt hangs; the hedge, sent after 50µs, answers and
	// the first is cancelled.
	{"HedgeWins", 50 * time.Microsecond, true},
}

// op is one call's operation: with slow, its first attempt waits for its
// context to end. attempts counts the attempts of the call.
type op struct {
	slow     bool
	attempts atomic.Int32
}

func (o *op) call(ctx context.Context) (int, error) {
	if o.attempts.Add(1) == 1 && o.slow {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 1, nil
}

type runner struct {
	name string
	// make returns a function making one call of the workload with o.
	make func(w workload) func(ctx context.Context, o *op) (int, error)
}

var runners = []runner{
	{"stormguard", func(w workload) func(context.Context, *op) (int, error) {
		h := &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 2}, Delay: w.delay, MaxHedges: 1}
		return func(ctx context.Context, o *op) (int, error) {
			return hedge.Do(ctx, h, o.call, nil)
		}
	}},
	{"failsafe-go", func(w workload) func(context.Context, *op) (int, error) {
		hp := hedgepolicy.NewBuilderWithDelay[int](w.delay).WithMaxHedges(1).Build()
		return func(ctx context.Context, o *op) (int, error) {
			return failsafe.With[int](hp).WithContext(ctx).GetWithExecution(func(e failsafe.Execution[int]) (int, error) {
				return o.call(e.Context())
			})
		}
	}},
}

func BenchmarkHedge(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			for _, r := range runners {
				b.Run("lib="+r.name, func(b *testing.B) {
					call := r.make(w)
					ctx := context.Background()
					var o op
					o.slow = w.slow
					b.ReportAllocs()
					for b.Loop() {
						o.attempts.Store(0)
						call(ctx, &o)
					}
				})
			}
		})
	}
}

// TestEquivalentWorkloads checks that both libraries make the same
// attempts and reach the same result on every workload.
func TestEquivalentWorkloads(t *testing.T) {
	for _, w := range workloads {
		for _, r := range runners {
			call := r.make(w)
			for range 20 {
				o := &op{slow: w.slow}
				v, err := call(context.Background(), o)
				want := int32(1)
				if w.slow {
					want = 2
				}
				if v != 1 || err != nil || o.attempts.Load() != want {
					t.Fatalf("%s/%s: %d, %v after %d attempts; want 1, nil after %d", w.name, r.name, v, err, o.attempts.Load(), want)
				}
			}
		}
	}
}
