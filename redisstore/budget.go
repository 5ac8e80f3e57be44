package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// Budget is a retry token bucket (budget.Ratio's design) shared by every
// process that uses the same Redis, Namespace and Name. It implements
// retry.Budget, like budget.Ratio, so a retry.Policy takes either.
//
// A process never waits on Redis to record an attempt or grant a retry.
// Deposits are summed locally and flushed in batches; retries are paid
// from a lease of tokens the process takes from the shared bucket, topped
// up at every exchange (every RefreshInterval, or sooner when the lease
// runs dry). Budgets whose retries cost nothing and which are gated on a
// threshold instead (gRPC A6 throttling, FailureCost) grant a retry while
// the last seen shared balance, with this process's own unflushed
// deposits and costs, is above the threshold. See the package
// documentation for the bound on fleet-wide retries.
//
// While Redis cannot be reached the process uses a private budget.Ratio
// (BudgetConfig.Local, or the same RatioConfig) and re-joins at the first
// successful exchange.
//
// Make one with NewBudget and Close it when done: Close gives the unused
// lease back. A Budget is safe for concurrent use. A nil *Budget grants
// every retry.
type Budget struct {
	s     budgetSettings
	l     *link
	local atomic.Pointer[budget.Ratio] // the private budget; replaced at every fallback

	joined  atomic.Bool  // the last exchange with Redis succeeded
	lease   atomic.Int64 // tokens this process may spend, in token units
	pending atomic.Int64 // net deposits not yet flushed, in token units
	shared  atomic.Int64 // the shared balance at the last exchange

	requests, retries, deposits, granted, refused atomic.Uint64

	syncMu   sync.Mutex
	seenKey  string
	epoch    atomic.Int64    // the bucket's epoch at the last exchange: changes when Redis lost it
	seq      uint64          // number of the last exchange made; guarded by syncMu
	retained *budgetExchange // an exchange that failed, to send again; guarded by syncMu
}

// budgetExchange is one exchange's deposits and lease request. One that
// failed is sent again, under the same number, before anything newer:
// Redis applies each number once and answers a replay with the reply it
// gave, so deposits count once and a granted lease reaches the process.
type budgetExchange struct {
	seq         uint64
	delta, want int64
	returned    int64 // the lease given back by Close
	closing     bool
}

var _ retry.PricedBudget = (*Budget)(nil)

// BudgetStats are a Budget's counters: the calls this process saw, in
// both modes, and its link to Redis.
type BudgetStats struct {
	// Requests, Retries, Deposits (successful first attempts), Granted and
	// Refused count this process's calls, as budget.Ratio's Stats do.
	budget.Stats
	// Link describes the connection to Redis.
	Link LinkStats
}

// NewBudget returns a Budget configured by c and starts its background
// exchange with Redis. It makes no Redis call itself: until the first
// exchange has answered (at once, in the background) the private budget
// decides. It returns an error wrapping ErrInvalidConfig if c.Validate
// does.
func NewBudget(c BudgetConfig) (*Budget, error) {
	s, err := c.resolve()
	if err != nil {
		return nil, err
	}
	return startBudget(s, nil), nil
}

// startBudget makes the Budget of the settings s and starts its loop.
// With group non-nil, the loop of group, a keyed group's, makes its
// exchanges instead, and is asked for one at once.
func startBudget(s budgetSettings, group *link) *Budget {
	b := &Budget{s: s, l: newLink(s.link, "budget")}
	b.local.Store(budget.NewRatio(s.local))
	b.seenKey = s.link.prefix + "seen:" + fmt.Sprintf("%016x", rand.Uint64())
	if group != nil {
		b.l.pokeTo = group
		close(b.l.stopped) // no loop of its own to wait for
		group.poke()
		return b
	}
	go b.l.run(b.loopSync)
	return b
}

// cost returns the tokens a retry after err costs.
func (b *Budget) cost(err error) int64 {
	switch {
	case b.s.throttleCost != b.s.retryCost && awsretry.IsThrottle(err):
		return b.s.throttleCost
	case b.s.timeoutCost != b.s.retryCost && budget.IsTimeout(err):
		return b.s.timeoutCost
	}
	return b.s.retryCost
}

// Record takes an attempt's result, as budget.Ratio.Record does. The
// deposit (or the failure's cost) is flushed to the shared bucket at the
// next exchange. A successful retry recorded here gives back RetryCost
// with RefundRetrySuccess; retry.Do and retry.Call record retries with
// RecordPriced instead, which gives back what the retry paid. Record on a
// nil Budget does nothing.
func (b *Budget) Record(retry bool, err error) {
	if b == nil {
		return
	}
	if !retry {
		b.record(false, err, 0, false)
		return
	}
	b.record(true, err, b.s.retryCost, false)
}

// RecordPriced is Record(true, err) for a retry whose WithdrawPriced
// returned price: a success gives back price with RefundRetrySuccess (the
// AWS SDKs' rule: 5 after a throttle, not the 14 a retry costs). It
// implements retry.PricedBudget. RecordPriced on a nil Budget does nothing.
func (b *Budget) RecordPriced(err error, price int64) {
	if b == nil {
		return
	}
	b.record(true, err, min(max(price, 0), max(b.s.retryCost, b.s.timeoutCost, b.s.throttleCost)), true)
}

// record is Record with the refund a successful retry gives back.
func (b *Budget) record(retry bool, err error, refund int64, priced bool) {
	switch {
	case retry:
		b.retries.Add(1)
	default:
		b.requests.Add(1)
		if err == nil {
			b.deposits.Add(1)
		}
	}
	if !b.joined.Load() {
		if priced {
			b.local.Load().RecordPriced(err, refund)
		} else {
			b.local.Load().Record(retry, err)
		}
		return
	}
	var delta int64
	switch {
	case err == nil && !retry:
		delta = b.s.refill
	case err == nil:
		delta = b.s.retryRefill
		if b.s.refund {
			delta += refund
		}
	case b.s.fail > 0 && budget.CountsAsFailure(err):
		delta = -b.s.fail
	}
	if delta != 0 {
		b.pending.Add(delta)
	}
}

// Withdraw asks for a retry after the failure err. In the shared mode it
// pays the retry's cost from this process's lease, and refuses when the
// lease cannot pay (asking Redis for more in the background). Withdraw on a
// nil Budget returns true.
func (b *Budget) Withdraw(err error) bool {
	_, ok := b.WithdrawPriced(err)
	return ok
}

// WithdrawPriced is Withdraw, and also returns what the granted retry paid,
// in millionths of a token (0 when refused, or free), for RecordPriced. It
// implements retry.PricedBudget. WithdrawPriced on a nil Budget returns 0,
// true.
func (b *Budget) WithdrawPriced(err error) (price int64, ok bool) {
	if b == nil {
		return 0, true
	}
	switch cost := b.cost(err); {
	case !b.joined.Load():
		price, ok = b.local.Load().WithdrawPriced(err)
	case cost == 0:
		ok = b.shared.Load()+b.pending.Load() > b.s.threshold
	default:
		ok = b.spend(cost)
		price = cost
	}
	if ok {
		b.granted.Add(1)
	} else {
		b.refused.Add(1)
		price = 0
	}
	return price, ok
}

// spend pays cost from the lease.
func (b *Budget) spend(cost int64) bool {
	for {
		l := b.lease.Load()
		if l < cost {
			b.l.poke()
			return false
		}
		if b.lease.CompareAndSwap(l, l-cost) {
			if l-cost < max(b.s.retryCost, b.s.timeoutCost, b.s.throttleCost) {
				b.l.poke() // top up before the next retry needs it
			}
			return true
		}
	}
}

// Available returns the tokens this process could spend now, for metrics
// (stormguard_retry_budget_tokens): its lease plus the shared balance seen
// at the last exchange, or the private budget's tokens while degraded. A
// nil Budget reports +Inf.
func (b *Budget) Available() float64 {
	if b == nil {
		return math.Inf(1)
	}
	if !b.joined.Load() {
		return b.local.Load().Available()
	}
	return fromUnits(b.lease.Load() + b.shared.Load())
}

// Lease returns the tokens this process holds from the shared bucket.
func (b *Budget) Lease() float64 {
	if b == nil {
		return 0
	}
	return fromUnits(b.lease.Load())
}

// Stats returns the Budget's counters.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	return BudgetStats{
		Stats: budget.Stats{
			Requests: b.requests.Load(),
			Retries:  b.retries.Load(),
			Deposits: b.deposits.Load(),
			Granted:  b.granted.Load(),
			Refused:  b.refused.Load(),
		},
		Link: b.l.stats(),
	}
}

// Sync flushes the deposits recorded since the last exchange and tops the
// lease up now, within ctx and Timeout; the background loop does this
// every RefreshInterval. It returns ErrClosed after Close; any other error
// means the process has fallen back to its private budget (see Stats).
func (b *Budget) Sync(ctx context.Context) error {
	if b == nil {
		return nil
	}
	if b.l.closed.Load() {
		return ErrClosed
	}
	return b.sync(ctx, false, false)
}

func (b *Budget) loopSync() { _ = b.sync(context.Background(), false, true) }

// Close stops the background exchange and waits until its goroutine has
// ended, an exchange in progress included (bounded by Timeout), and gives
// the unused lease and unflushed deposits back to the shared bucket
// (within Timeout), even if the last exchange failed. Called from an
// OnDegraded that the background goroutine is running, Close does not wait
// for that goroutine (it is the caller's). Once Close has begun,
// OnDegraded is not called again. Withdraw then grants retries only from
// the private budget. Close is safe to call more than once, on a nil
// Budget, and from OnDegraded.
func (b *Budget) Close() {
	if b == nil || !b.l.shut() {
		return
	}
	defer b.joined.Store(false) // even if the Scripter panics
	_ = b.sync(context.Background(), true, false)
}

// sync makes one exchange; loop is true on the background loop's goroutine.
func (b *Budget) sync(ctx context.Context, closing, loop bool) error {
	err := b.syncLocked(ctx, closing)
	// Outside syncMu: OnDegraded may call Close.
	if loop {
		b.l.enterCallbacks()
		defer b.l.leaveCallbacks()
	}
	return b.told(err)
}

// told tells the link how an exchange ended (the log and OnDegraded of a
// fallback or a re-join), outside syncMu, and returns err wrapped.
func (b *Budget) told(err error) error {
	if err != nil {
		b.l.failed(err)
		return fmt.Errorf("redisstore: budget %s: sync: %w", b.s.link.name, err)
	}
	b.l.succeeded()
	return nil
}

func (b *Budget) syncLocked(ctx context.Context, closing bool) error {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	if closing && b.retained == nil && b.pending.Load() == 0 && b.lease.Load() == 0 {
		return nil // nothing to give back
	}
	ctx, cancel := b.l.context(ctx)
	defer cancel()
	x, resend := b.nextExchange(closing)
	err := b.exchange(ctx, x)
	return b.drainLocked(ctx, closing, resend, err)
}

// nextExchange returns the next exchange: the one kept from a failed
// exchange (resend true), or a new one. The caller holds syncMu.
func (b *Budget) nextExchange(closing bool) (x *budgetExchange, resend bool) {
	if b.retained != nil {
		return b.retained, true
	}
	b.seq++
	x = &budgetExchange{seq: b.seq, delta: b.pending.Swap(0), closing: closing}
	switch {
	case closing:
		x.returned = b.lease.Swap(0)
	case b.s.retryCost > 0 || b.s.timeoutCost > 0 || b.s.throttleCost > 0:
		x.want = max(b.s.lease-b.lease.Load(), 0)
	}
	if x.delta != 0 || x.want > 0 || x.returned != 0 {
		b.retained = x // kept until Redis has it, even if the exchange panics
	}
	return x, false
}

// drainLocked completes an exchange that ended with err: once Redis has
// the exchange kept from a failed one (resend), the newer one is made;
// then the process re-joins, or falls back to its private budget. The
// caller holds syncMu. It returns the error of the last exchange.
func (b *Budget) drainLocked(ctx context.Context, closing, resend bool, err error) error {
	for err == nil {
		b.retained = nil
		if !resend {
			break
		}
		// the failed exchange is in; now the newer one
		var x *budgetExchange
		x, resend = b.nextExchange(closing)
		err = b.exchange(ctx, x)
	}
	if err != nil {
		if b.joined.Swap(false) {
			b.resetLocal()
		}
		return err
	}
	if !closing {
		b.joined.Store(true)
	}
	return nil
}

// resetLocal starts a fresh private budget holding the tokens this process
// could spend when it last followed the shared bucket (its lease and the
// shared balance, at most the private MaxTokens), instead of resuming the
// private bucket where an earlier outage left it.
func (b *Budget) resetLocal() {
	c := b.s.local
	d, err := c.WithDefaults()
	if err != nil {
		return // validated by NewBudget
	}
	tokens := min(max(fromUnits(b.lease.Load()+b.shared.Load()), 0), d.MaxTokens)
	c.InitialTokens, c.StartEmpty = tokens, tokens == 0
	b.local.Store(budget.NewRatio(c))
}

// exchange runs the budget script for x and takes the lease it grants.
// If Redis lost the bucket this process leased from (a new epoch), the
// lease is void: it is replaced by the one granted from the new bucket.
func (b *Budget) exchange(ctx context.Context, x *budgetExchange) error {
	keys, args, full := b.budgetCall(x)
	v, err := budgetScript.Run(ctx, b.s.link.client, keys, args...).Int64Slice()
	if err != nil {
		return err
	}
	return b.budgetReply(x, full, v)
}

// budgetCall returns the keys and arguments of the budget script for x,
// and the lease the process asks to hold.
func (b *Budget) budgetCall(x *budgetExchange) (keys []string, args []any, full int64) {
	if b.s.retryCost > 0 || b.s.timeoutCost > 0 || b.s.throttleCost > 0 {
		full = b.s.lease
	}
	if x.closing {
		full = 0
	}
	return []string{b.s.link.prefix + "budget", b.seenKey}, []any{
		x.delta, x.want, b.s.max, b.s.initial, b.s.threshold, b.s.link.ttlMs, x.seq,
		b.epoch.Load(), full, x.returned,
	}, full
}

// budgetReply takes the lease the budget script's reply v to x grants.
func (b *Budget) budgetReply(x *budgetExchange, full int64, v []int64) error {
	if len(v) != 4 || v[0] < 0 || v[0] > max(x.want, full) || v[1] < 0 || v[3] < 0 || v[3] > 1 {
		return fmt.Errorf("%w: %v", errReply, v)
	}
	if v[3] == 1 {
		b.lease.Store(v[0])
	} else {
		b.lease.Add(v[0])
	}
	b.shared.Store(v[1])
	b.epoch.Store(v[2])
	return nil
}
