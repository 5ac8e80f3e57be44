package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// newBudgets makes n Budgets sharing one name on the shared redis-server,
// each with its own client, on one fake clock, and waits until each has
// joined and its loop waits for the clock.
func newBudgets(t *testing.T, n int, cfg BudgetConfig) ([]*Budget, *clocktest.Fake) {
	t.Helper()
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	cfg.Name = "search"
	if cfg.Namespace == "" {
		cfg.Namespace = namespace(t)
	}
	cfg.Clock = fc
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = testInterval
	}
	var bs []*Budget
	for range n {
		c := cfg
		c.Client = newClient(t, srv.addr)
		b, err := NewBudget(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
	}
	for _, b := range bs {
		waitFor(t, "the budget's first exchange", func() bool { return b.Stats().Link.Syncs >= 1 })
	}
	fc.BlockUntil(n)
	return bs, fc
}

// workload drives one client's calls through a budget: each call's first
// attempt succeeds with probability pFirst, each retry with pRetry, and a
// failed call retries (at most 3 times) while the budget grants it. sync,
// if set, is called every 10 calls.
type workload struct {
	calls          int
	pFirst, pRetry float64
	seed           uint64
}

type outcome struct{ requests, firstOK, retries int }

func (w workload) run(b retry.Budget, sync func()) outcome {
	rng := rand.New(rand.NewPCG(w.seed, 7))
	var o outcome
	for i := range w.calls {
		if sync != nil && i%10 == 0 {
			sync()
		}
		o.requests++
		ok := rng.Float64() < w.pFirst
		b.Record(false, errOrNil(ok))
		if ok {
			o.firstOK++
			continue
		}
		for range 3 {
			if !b.Withdraw(errDown) {
				break
			}
			o.retries++
			ok = rng.Float64() < w.pRetry
			b.Record(true, errOrNil(ok))
			if ok {
				break
			}
		}
	}
	return o
}

func errOrNil(ok bool) error {
	if ok {
		return nil
	}
	return errDown
}

// runFleet runs the workload on 10 clients at once, each with its own
// budget from mk, and sums the outcomes.
func runFleet(w workload, budgets []retry.Budget, syncs []func()) outcome {
	var (
		mu    sync.Mutex
		total outcome
		wg    sync.WaitGroup
	)
	for i, b := range budgets {
		w := w
		w.seed = uint64(i + 1)
		var s func()
		if syncs != nil {
			s = syncs[i]
		}
		wg.Go(func() {
			o := w.run(b, s)
			mu.Lock()
			total.requests += o.requests
			total.firstOK += o.firstOK
			total.retries += o.retries
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

func fleetOf(t *testing.T, bs []*Budget) ([]retry.Budget, []func()) {
	var budgets []retry.Budget
	var syncs []func()
	for _, b := range bs {
		budgets = append(budgets, b)
		syncs = append(syncs, func() {
			if err := b.Sync(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	return budgets, syncs
}

func privateFleet(n int, c budget.RatioConfig) []retry.Budget {
	var bs []retry.Budget
	for range n {
		bs = append(bs, budget.NewRatio(c))
	}
	return bs
}

// TestFleetBudgetStorm: when every call fails, 10 clients sharing a
// TenPercent budget retry no more than one bucket allows (10 retries),
// where 10 private budgets allow 10 times as many.
func TestFleetBudgetStorm(t *testing.T) {
	const clients = 10
	w := workload{calls: 100, pFirst: 0, pRetry: 0}
	bs, _ := newBudgets(t, clients, BudgetConfig{Ratio: budget.TenPercent()})
	budgets, syncs := fleetOf(t, bs)
	fleet := runFleet(w, budgets, syncs)
	private := runFleet(w, privateFleet(clients, budget.TenPercent()), nil)

	t.Logf("storm: fleet budget granted %d retries, %d private budgets %d", fleet.retries, clients, private.retries)
	if fleet.retries > 10 || fleet.retries == 0 {
		t.Fatalf("fleet budget granted %d retries, want 1 to 10 (one bucket of 10 tokens, no successes)", fleet.retries)
	}
	if private.retries != clients*10 {
		t.Fatalf("private budgets granted %d retries, want %d", private.retries, clients*10)
	}
	if private.retries < 10*fleet.retries {
		t.Fatalf("private budgets granted %d retries, fleet %d: want at least 10x fewer with the fleet budget", private.retries, fleet.retries)
	}
}

// TestFleetBudgetWithinRatio: with mixed outcomes, the fleet's retries
// stay within the bound of the package documentation:
//
//	retries × RetryCost ≤ InitialTokens + Refill × successful first attempts
//
// (the leases only move tokens out of the bucket early; they never create
// any), while 10 private budgets grant more.
func TestFleetBudgetWithinRatio(t *testing.T) {
	const clients = 10
	w := workload{calls: 300, pFirst: 0.6, pRetry: 0.3}
	cfg := budget.TenPercent()
	bs, _ := newBudgets(t, clients, BudgetConfig{Ratio: cfg})
	budgets, syncs := fleetOf(t, bs)
	fleet := runFleet(w, budgets, syncs)
	private := runFleet(w, privateFleet(clients, cfg), nil)

	bound := cfg.MaxTokens + cfg.Refill*float64(fleet.firstOK)
	t.Logf("mixed: %d requests, %d succeeded first; fleet budget granted %d retries (bound %.1f), private budgets %d",
		fleet.requests, fleet.firstOK, fleet.retries, bound, private.retries)
	if float64(fleet.retries) > bound {
		t.Fatalf("fleet granted %d retries, above the bound %.1f", fleet.retries, bound)
	}
	if fleet.retries == 0 {
		t.Fatal("fleet granted no retry")
	}
	if private.retries <= fleet.retries {
		t.Fatalf("private budgets granted %d retries, fleet %d: want more from private budgets", private.retries, fleet.retries)
	}
	var st budget.Stats
	for _, b := range bs {
		s := b.Stats()
		st.Requests += s.Requests
		st.Granted += s.Granted
		st.Deposits += s.Deposits
	}
	if st.Requests != uint64(fleet.requests) || st.Granted != uint64(fleet.retries) || st.Deposits != uint64(fleet.firstOK) {
		t.Fatalf("summed Stats %+v disagree with the workload %+v", st, fleet)
	}
}

// TestFleetBudgetThreshold: a budget whose failures pay (gRPC A6
// throttling) gates retries on the shared balance: one client's failures,
// once flushed, stop the others' retries.
func TestFleetBudgetThreshold(t *testing.T) {
	bs, _ := newBudgets(t, 2, BudgetConfig{Ratio: budget.GRPCThrottling(10, 0.1)})
	a, b := bs[0], bs[1]
	for range 6 {
		a.Record(false, errDown) // 10 - 6 = 4 tokens, below the threshold of 5
	}
	if a.Withdraw(errDown) {
		t.Fatal("A granted a retry after its own failures emptied the bucket below the threshold")
	}
	if !b.Withdraw(errDown) {
		t.Fatal("B refused a retry before it could know of A's failures")
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Withdraw(errDown) {
		t.Fatal("B granted a retry after A's failures were flushed")
	}
	if got := b.Available(); got != 4 {
		t.Fatalf("B.Available = %v, want 4", got)
	}
	for range 20 {
		b.Record(false, nil) // +2 tokens: 6 > 5
	}
	if !b.Withdraw(errDown) {
		t.Fatal("B refused a retry after its successes refilled the bucket")
	}
}

// TestBudgetLeaseToppedUpEarly: a process whose lease runs dry asks for
// more at once (after RefreshInterval/10), not at the next refresh.
func TestBudgetLeaseToppedUpEarly(t *testing.T) {
	bs, fc := newBudgets(t, 1, BudgetConfig{Ratio: budget.TenPercent(), RefreshInterval: time.Hour, Timeout: time.Second})
	b := bs[0]
	if got := b.Lease(); got != 2 {
		t.Fatalf("lease = %v, want the default of twice the retry cost (2)", got)
	}
	// Each poke of the loop (the lease running low, then dry) makes it
	// re-arm its timer for RefreshInterval/10 after the last exchange. Wait
	// for each re-arm before going on, so that no re-arm can follow the
	// Advance below and count from the advanced time.
	armed := fc.Armed()
	for i := range 2 {
		if !b.Withdraw(errDown) {
			t.Fatalf("retry %d refused with a lease of 2", i)
		}
	}
	fc.BlockUntilArmed(armed + 1) // the second retry left the lease below one retry's cost
	if b.Withdraw(errDown) {
		t.Fatal("a retry was granted with an empty lease")
	}
	fc.BlockUntilArmed(armed + 2) // the refusal poked the loop again
	fc.Advance(6 * time.Minute)   // RefreshInterval/10 after the last exchange
	waitFor(t, "the lease to be topped up", func() bool { return b.Lease() == 2 })
	if !b.Withdraw(errDown) {
		t.Fatal("retry refused after the top-up")
	}
	if got := b.Available(); got != 7 {
		t.Fatalf("Available = %v, want 7 (lease 1 + 6 shared)", got)
	}
}

// TestBudgetCloseReturnsLease: Close gives the unused lease back.
func TestBudgetCloseReturnsLease(t *testing.T) {
	bs, _ := newBudgets(t, 2, BudgetConfig{Ratio: budget.TenPercent(), LeaseTokens: 3})
	a, b := bs[0], bs[1]
	ctx := context.Background()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Available(); got != 7 {
		t.Fatalf("B.Available = %v, want 3 leased + 4 shared", got)
	}
	a.Close()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Available(); got != 10 {
		t.Fatalf("B.Available after A closed = %v, want 3 leased + 7 shared", got)
	}
	if err := a.Sync(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
}

// TestBudgetAWSStandard: timeout retries cost more and successful retries
// refund, fleet-wide.
func TestBudgetAWSStandard(t *testing.T) {
	bs, _ := newBudgets(t, 1, BudgetConfig{Ratio: awsretry.StandardLegacy(), LeaseTokens: 20})
	b := bs[0]
	if !b.Withdraw(retry.ErrAttemptTimeout) {
		t.Fatal("timeout retry refused")
	}
	if got := b.Lease(); got != 10 {
		t.Fatalf("lease after a timeout retry = %v, want 20-10", got)
	}
	if !b.Withdraw(errDown) {
		t.Fatal("retry refused")
	}
	if got := b.Lease(); got != 5 {
		t.Fatalf("lease = %v, want 10-5", got)
	}
	b.Record(true, nil) // refund 5
	b.Record(false, nil)
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 500 - 20 (first lease) + 6 deposited, then the lease is topped up to 20 again.
	if got := b.Available(); got != 20+500-20+6-15 {
		t.Fatalf("Available = %v, want %v", got, 20+500-20+6-15)
	}
}

// TestFleetBudgetRefundsWhatTheRetryPaid: the fleet budget is a
// retry.PricedBudget, so a successful retry after a throttle gives back
// the 5 it paid under the 2026 rules (not the 14 a retry costs), and a
// legacy retry after a timeout gives back its 10: the quota drains during
// a throttling storm, as in the AWS SDKs (issue #31 items 18 and 19, for
// the fleet).
func TestFleetBudgetRefundsWhatTheRetryPaid(t *testing.T) {
	throttled := awsCode("ThrottlingException")
	for _, tc := range []struct {
		name string
		cfg  budget.RatioConfig
		err  error
		paid float64
	}{
		{"2026 throttle", awsretry.Standard2026(), throttled, 5},
		{"2026 other", awsretry.Standard2026(), errDown, 14},
		{"legacy timeout", awsretry.StandardLegacy(), retry.ErrAttemptTimeout, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, _ := newBudgets(t, 1, BudgetConfig{Ratio: tc.cfg, LeaseTokens: 40})
			b := bs[0]
			before := b.Lease()
			price, ok := b.WithdrawPriced(tc.err)
			if !ok {
				t.Fatal("refused")
			}
			if got := before - b.Lease(); got != tc.paid {
				t.Fatalf("paid %v, want %v", got, tc.paid)
			}
			b.RecordPriced(nil, price)
			if err := b.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			lease, total := b.Lease(), b.Available()
			// Through retry.Do: the retry that succeeds is recorded with its price.
			n := 0
			_, err := retry.Do(context.Background(), &retry.Policy{MaxAttempts: 2, Budget: b, Backoff: noWait{}},
				func(context.Context) (int, error) {
					if n++; n == 1 {
						return 0, tc.err
					}
					return 1, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The first attempt's success deposits nothing here (it failed);
			// the retry paid and was refunded: the balance is unchanged.
			if got := b.Available(); got != total {
				t.Fatalf("Available after a paid and refunded retry = %v, want %v (lease %v -> %v)", got, total, lease, b.Lease())
			}
		})
	}
}

type awsCode string

func (e awsCode) Error() string     { return string(e) }
func (e awsCode) ErrorCode() string { return string(e) }

type noWait struct{}

func (noWait) Delay(int, time.Duration) time.Duration { return 0 }
