package queue_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// toggleBreaker is open while the test says so.
type toggleBreaker struct{ open atomic.Bool }

func (b *toggleBreaker) Ready() error {
	if b.open.Load() {
		return errOpen
	}
	return nil
}

func (b *toggleBreaker) Allow() (func(error), error) {
	if err := b.Ready(); err != nil {
		return nil, err
	}
	return func(error) {}, nil
}

// toggleBudget grants retries while the test says so.
type toggleBudget struct{ deny atomic.Bool }

func (*toggleBudget) Record(bool, error)    {}
func (b *toggleBudget) Withdraw(error) bool { return !b.deny.Load() }

// TestSchedulerAccounting checks, under random interleavings of submits,
// attempt outcomes, breaker and budget refusals, clock moves and a
// graceful or abrupt Close, that Submitted == Succeeded + Failed +
// Abandoned + Pending in every snapshot, that pending tasks and running
// attempts stay within MaxPending and Workers, and that every accepted
// task's done function is called exactly once with an error that matches
// how it was counted.
func TestSchedulerAccounting(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fake := clocktest.NewFake()
		workers := rapid.IntRange(1, 3).Draw(rt, "workers")
		maxPending := rapid.IntRange(1, 8).Draw(rt, "maxPending")
		br, bud := &toggleBreaker{}, &toggleBudget{}
		s := queue.NewScheduler(queue.SchedulerConfig{
			Workers:    workers,
			MaxPending: maxPending,
			Policy: &retry.Policy{
				MaxAttempts: rapid.IntRange(0, 3).Draw(rt, "maxAttempts"),
				MaxElapsed:  rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(rt, "maxElapsed"),
				Backoff:     backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Full, Rand: backoff.NewSource(1)},
				Breaker:     br,
				Budget:      bud,
				Clock:       fake,
			},
		})
		defer closeNow(s) // also when rapid discards this case midway
		sc := newScript()

		var (
			mu    sync.Mutex
			dones = map[int]int{} // task id → done calls
			oks   int
			errs  []error
		)
		accepted := 0
		next := 1
		respond := func(rt *rapid.T, err error) {
			select {
			case a := <-sc.attempts:
				a.reply <- err
			default:
				rt.Skip("no attempt in progress")
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"submit": func(rt *rapid.T) {
				id := next
				next++
				ok := s.Submit(sc.task(id), func(err error) {
					mu.Lock()
					defer mu.Unlock()
					dones[id]++
					if err == nil {
						oks++
					} else {
						errs = append(errs, err)
					}
				})
				if ok {
					accepted++
				}
			},
			"succeed":       func(rt *rapid.T) { respond(rt, nil) },
			"fail":          func(rt *rapid.T) { respond(rt, errDown) },
			"reject":        func(rt *rapid.T) { respond(rt, retry.Permanent(errDown)) },
			"toggleBreaker": func(rt *rapid.T) { br.open.Store(!br.open.Load()) },
			"toggleBudget":  func(rt *rapid.T) { bud.deny.Store(!bud.deny.Load()) },
			"advance": func(rt *rapid.T) {
				fake.Advance(time.Duration(rapid.IntRange(0, 2000).Draw(rt, "ms")) * time.Millisecond)
			},
			"": func(rt *rapid.T) {
				st := s.Stats()
				checkSchedInvariant(rt, st)
				if st.Pending > uint64(maxPending) || st.Running > uint64(workers) {
					rt.Fatalf("bounds broken: %+v", st)
				}
			},
		})

		graceful := rapid.Bool().Draw(rt, "graceful")
		if graceful {
			br.open.Store(false)
			bud.deny.Store(false)
		}
		abandoned := closeEitherWay(rt, graceful, fake, s, sc.attempts, func(a attempt) { a.reply <- nil })

		st := s.Stats()
		checkSchedInvariant(rt, st)
		mu.Lock()
		defer mu.Unlock()
		if st.Pending != 0 || st.Submitted != uint64(accepted) || st.Abandoned != uint64(abandoned) {
			rt.Fatalf("stats %+v, accepted %d, abandoned %d", st, accepted, abandoned)
		}
		if len(dones) != accepted {
			rt.Fatalf("%d done calls for %d accepted tasks", len(dones), accepted)
		}
		for id, n := range dones {
			if n != 1 {
				rt.Fatalf("task %d: done called %d times", id, n)
			}
		}
		closed := 0
		for _, err := range errs {
			var re *retry.Error
			if !errors.As(err, &re) {
				rt.Fatalf("done(%v): not a *retry.Error", err)
			}
			if errors.Is(err, queue.ErrClosed) {
				closed++
			}
		}
		if uint64(oks) != st.Succeeded || uint64(len(errs)) != st.Failed+st.Abandoned || uint64(closed) != st.Abandoned {
			rt.Fatalf("stats %+v; done: %d nil, %d errors (%d closed)", st, oks, len(errs), closed)
		}
	})
}
