package budget_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// The hammer tests run 1000 goroutines against one budget (run them with
// -race) and check that the totals afterwards are exact: no deposit,
// grant, refusal or release is lost to a race, and no limit is overrun.

const goroutines = 1000

// hammer runs f(g) in goroutines goroutines started together.
func hammer(f func(g int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for g := range goroutines {
		done.Go(func() {
			start.Wait()
			f(g)
		})
	}
	start.Done()
	done.Wait()
}

// TestRatioHammer runs each hammer twice: on the one balance, and with the
// balance lent out to the cells from the start (the lending's calls are
// then served by the cells' leases and the lender, and end it when the
// bucket runs dry).
func TestRatioHammer(t *testing.T) {
	for _, lend := range []bool{false, true} {
		t.Run(map[bool]string{false: "central", true: "lent"}[lend], func(t *testing.T) {
			testRatioHammer(t, lend)
		})
	}
}

func testRatioHammer(t *testing.T, lend bool) {
	newRatio := func(c budget.RatioConfig) *budget.Ratio {
		r := budget.NewRatio(c)
		if lend {
			budget.Lend(r)
		}
		return r
	}
	t.Run("drain", func(t *testing.T) {
		// 5000 tokens, 10000 retries asked for: exactly 5000 granted.
		r := newRatio(budget.RatioConfig{MaxTokens: 5000})
		hammer(func(int) { withdrawN(r, 10, errDown) })
		want := budget.Stats{Granted: 5000, Refused: 5000}
		if got := r.Stats(); got != want {
			t.Fatalf("Stats() = %+v, want %+v", got, want)
		}
		checkTokens(t, r, 0)
	})
	t.Run("mixed", func(t *testing.T) {
		// Deposits, failures, retries and refunds interleaved. The bucket
		// never reaches its cap, so every token is accounted for exactly:
		// tokens = initial + 0.5·deposits + 0.25·successful retries − granted.
		r := newRatio(budget.RatioConfig{MaxTokens: 1e6, InitialTokens: 1000, Refill: 0.5, RetryRefill: 0.25})
		var granted, retries, retryWins atomic.Int64
		hammer(func(g int) {
			for i := range 20 {
				switch (g + i) % 4 {
				case 0, 1:
					r.Record(false, nil)
				case 2:
					r.Record(false, errDown)
					if r.Withdraw(errDown) {
						granted.Add(1)
						retries.Add(1)
						if g%2 == 0 {
							r.Record(true, nil)
							retryWins.Add(1)
						} else {
							r.Record(true, errDown)
						}
					}
				case 3:
					if r.Withdraw(errSlow) {
						granted.Add(1)
					}
				}
			}
		})
		s := r.Stats()
		if s.Requests != 15000 || s.Deposits != 10000 || s.Granted+s.Refused != 10000 ||
			s.Granted != uint64(granted.Load()) || s.Retries != uint64(retries.Load()) {
			t.Fatalf("Stats() = %+v; granted %d", s, granted.Load())
		}
		want := 1000 + 0.5*10000 + 0.25*float64(retryWins.Load()) - float64(granted.Load())
		checkTokens(t, r, want)
	})
}

func TestWindowHammer(t *testing.T) {
	clk := clocktest.NewFake()
	w := budget.NewWindow(budget.WindowConfig{Clock: clk})
	// 10000 requests, then 5000 retries asked for: 20% + 100 = 2100 granted.
	hammer(func(int) {
		for range 10 {
			w.Record(false, nil)
		}
	})
	hammer(func(int) { withdrawN(w, 5, errDown) })
	want := budget.Stats{Requests: 10000, Deposits: 10000, Granted: 2100, Refused: 2900}
	if got := w.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
	// Requests and retries while time moves: every call is counted once.
	var granted, asked atomic.Int64
	var ticks sync.WaitGroup
	ticks.Go(func() {
		for range 200 {
			clk.Advance(100 * time.Millisecond)
		}
	})
	hammer(func(g int) {
		for i := range 10 {
			if (g+i)%3 == 0 {
				asked.Add(1)
				if w.Withdraw(errDown) {
					granted.Add(1)
				}
			} else {
				w.Record(false, nil)
			}
		}
	})
	ticks.Wait()
	s := w.Stats()
	if s.Requests != 10000+uint64(10000-asked.Load()) || s.Granted+s.Refused != 5000+uint64(asked.Load()) || s.Granted != 2100+uint64(granted.Load()) {
		t.Fatalf("Stats() = %+v; %d of %d granted in the second run", s, granted.Load(), asked.Load())
	}
}

func TestConcurrencyHammer(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		// Every goroutine asks for a retry and holds what it gets until all
		// have asked: exactly 3 are granted each round.
		c := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 3})
		const rounds = 5
		for round := range rounds {
			var asked sync.WaitGroup
			asked.Add(goroutines)
			hammer(func(g int) {
				c.Start(false)
				c.Record(false, errDown)
				ok := c.Withdraw(errDown)
				asked.Done()
				asked.Wait()
				if !ok {
					return
				}
				if g%2 == 0 {
					c.Refund()
					return
				}
				c.Start(true)
				c.Record(true, nil)
			})
			checkActive(t, c, 0, 0)
			if s := c.Stats(); s.Granted != 3*uint64(round+1) || s.Refused != (goroutines-3)*uint64(round+1) {
				t.Fatalf("round %d: Stats() = %+v, want 3 granted per round", round, s)
			}
		}
		if s := c.Stats(); s.Requests != rounds*goroutines || s.Retries+s.Refunded != 3*rounds {
			t.Fatalf("Stats() = %+v", s)
		}
	})
	t.Run("free", func(t *testing.T) {
		c := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 3})
		var active, peak, granted, refunded atomic.Int64
		hammer(func(g int) {
			for i := range 10 {
				c.Start(false)
				c.Record(false, errDown)
				if !c.Withdraw(errDown) {
					continue
				}
				granted.Add(1)
				n := active.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				if (g+i)%3 == 0 { // abandoned during the wait
					active.Add(-1)
					c.Refund()
					refunded.Add(1)
					continue
				}
				c.Start(true)
				active.Add(-1)
				c.Record(true, nil)
			}
		})
		if p := peak.Load(); p > 3 {
			t.Fatalf("%d retries were active at once, limit 3", p)
		}
		checkActive(t, c, 0, 0)
		want := budget.Stats{Requests: 10000, Retries: uint64(granted.Load() - refunded.Load()), Granted: uint64(granted.Load()),
			Refused: 10000 - uint64(granted.Load()), Refunded: uint64(refunded.Load())}
		if s := c.Stats(); s != want {
			t.Fatalf("Stats() = %+v, want %+v", s, want)
		}
	})
}

// The counters are striped per processor: Stats read while the hammer runs
// must never go back, and once it stops they must be exact.
func TestStatsDuringCalls(t *testing.T) {
	for name, b := range map[string]interface {
		retry.Budget
		Stats() budget.Stats
	}{
		"Ratio":  budget.NewRatio(budget.RatioConfig{MaxTokens: 100}),
		"Window": budget.NewWindow(budget.WindowConfig{Clock: clocktest.NewFake(), MinRetriesPerSecond: 10}),
	} {
		t.Run(name, func(t *testing.T) {
			stop := make(chan struct{})
			var reader sync.WaitGroup
			var bad atomic.Value
			reader.Go(func() {
				var last budget.Stats
				for {
					s := b.Stats()
					if s.Requests < last.Requests || s.Deposits < last.Deposits || s.Retries < last.Retries ||
						s.Granted < last.Granted || s.Refused < last.Refused {
						bad.Store(fmt.Sprintf("Stats went back from %+v to %+v", last, s))
						return
					}
					last = s
					select {
					case <-stop:
						return
					default:
					}
				}
			})
			var granted atomic.Uint64
			hammer(func(g int) {
				for i := range 10 {
					switch (g + i) % 3 {
					case 0:
						b.Record(false, nil)
					case 1:
						b.Record(true, errDown)
					case 2:
						if b.Withdraw(errDown) {
							granted.Add(1)
						}
					}
				}
			})
			close(stop)
			reader.Wait()
			if msg := bad.Load(); msg != nil {
				t.Fatal(msg)
			}
			// (g+i)%3 over g < 1000, i < 10: 3334 deposits, 3333 retries, 3333 withdrawals.
			want := budget.Stats{Requests: 3334, Deposits: 3334, Retries: 3333, Granted: granted.Load(), Refused: 3333 - granted.Load()}
			if got := b.Stats(); got != want {
				t.Fatalf("Stats() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestRatioLeaseHammer has goroutines on different processors share two
// cells of a lent-out Ratio, so that their compare-and-swaps on the cells'
// leases collide; far from both limits every call is served by a lease or
// the lender, and the balance afterwards is exact.
func TestRatioLeaseHammer(t *testing.T) {
	r := budget.NewRatio(budget.RatioConfig{MaxTokens: 1e6, InitialTokens: 5e5, Refill: 0.5, RetryCost: 1})
	budget.Lend(r)
	budget.SetLease(r, 0, 0.001, 0.001) // 500 tokens and 500 of space: renewed often
	budget.SetLease(r, 1, 0.3, 0.3)
	const goroutines, calls = 8, 20000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				if i%2 == 0 {
					budget.RecordAt(r, g%2, false, nil)
				} else if !budget.WithdrawAt(r, g%2, errDown) {
					t.Errorf("a withdrawal far from empty was refused")
					return
				}
			}
		})
	}
	wg.Wait()
	s := r.Stats()
	if s.Deposits != goroutines*calls/2 || s.Granted != goroutines*calls/2 || s.Refused != 0 {
		t.Fatalf("Stats() = %+v", s)
	}
	checkTokens(t, r, 5e5+0.5*goroutines*calls/2-goroutines*calls/2)
}
