package budget

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// Defaults for zero RatioConfig fields.
const (
	DefaultMaxTokens = 10.0 // RatioConfig.MaxTokens
	DefaultRefill    = 0.1  // RatioConfig.Refill
	DefaultRetryCost = 1.0  // RatioConfig.RetryCost, when FailureCost is 0
)

// MaxRatioTokens is the largest MaxTokens a RatioConfig may ask for.
const MaxRatioTokens = 1e9

// tokenUnit is the resolution of a Ratio's arithmetic: amounts are kept as
// integer millionths of a token, so sums are exact and order-independent.
const tokenUnit = 1e6

// RatioConfig configures a Ratio token bucket. The zero value is the
// TenPercent budget. Token amounts are kept in millionths of a token; a
// positive amount smaller than that is rejected by Validate.
//
// A Ratio earns tokens from successes and pays for retries, in one of two
// ways (or both):
//
//   - RetryCost: every granted retry pays its cost; a retry is refused when
//     the bucket cannot pay it. (AWS SDK standard mode, the 10% budget.)
//   - FailureCost: every failed attempt takes FailureCost from the bucket,
//     and a retry is granted while the bucket holds more than Threshold.
//     (gRPC A6 retry throttling.)
type RatioConfig struct {
	// MaxTokens is the bucket's capacity: the most retries a burst of
	// failures can draw on (with RetryCost 1). 0: DefaultMaxTokens (10).
	MaxTokens float64

	// InitialTokens is what the bucket holds when made, at most MaxTokens.
	// 0: MaxTokens (the bucket starts full, so a new client may retry before
	// it has seen a success), unless StartEmpty is set.
	InitialTokens float64

	// StartEmpty makes the bucket start with no tokens: no retry is granted
	// until successes have paid for it. InitialTokens must then be 0.
	StartEmpty bool

	// Refill is added for each successful first attempt. Refill/RetryCost is
	// the share of successful calls that may be retried once the initial
	// tokens are spent: 0.1/1 is 10%. 0: DefaultRefill (0.1).
	Refill float64

	// RetryRefill is added for each successful retry. gRPC A6 counts every
	// successful RPC, including those that succeeded on a retry. 0: nothing.
	RetryRefill float64

	// RefundRetrySuccess gives back, when a retry succeeds, the cost that
	// retry paid (AWS SDK standard mode), so retries that work cost nothing
	// in the long run: ThrottleCost, TimeoutCost or RetryCost, whichever
	// its Withdraw charged. retry.Call (and so retry.Do) tells the Ratio
	// which it was through WithdrawPriced and RecordPriced
	// (retry.PricedBudget). A caller that uses only Record and Withdraw
	// cannot say, and a successful retry it records gets RetryCost back.
	RefundRetrySuccess bool

	// RetryCost is paid by every granted retry. 0: DefaultRetryCost (1),
	// or 0 when FailureCost is set (failures already pay, as in gRPC A6).
	RetryCost float64

	// TimeoutCost is paid instead of RetryCost by a retry after a timeout
	// (see IsTimeout): a timed-out downstream is the likeliest to be
	// overloaded. 0: RetryCost.
	TimeoutCost float64

	// ThrottleCost is paid instead of RetryCost (and TimeoutCost) by a
	// retry after a throttling answer (see Throttles). The AWS SDKs' 2026
	// rules make it cheaper than other retries (5 against 14): a throttle
	// is the server asking the client to slow down, which the backoff
	// does, not a sign that the request failed. 0: RetryCost.
	//
	// With RefundRetrySuccess a successful retry after a throttle gives
	// back ThrottleCost, what it paid, when recorded through RecordPriced
	// (as retry.Call does); see RefundRetrySuccess.
	ThrottleCost float64

	// Throttles tells which failures are throttling answers, for
	// ThrottleCost. nil: retry.IsThrottle (a retry.ThrottleReporter's
	// verdict, or an HTTP status 429 from a retry.StatusReporter).
	// awsretry.Throttles adds the AWS throttling error codes (its presets
	// set it). It is asked only when ThrottleCost differs from RetryCost;
	// if it panics, the panic goes on to Withdraw's caller and the bucket
	// is left as it was. RatioConfig stays comparable with == as long as
	// the rule's dynamic type is (an empty struct, a pointer).
	Throttles ThrottleRule

	// FailureCost is taken from the bucket (down to 0) for every failed
	// attempt, first or retry, except errors marked retry.Permanent and the
	// caller's cancellation (context.Canceled). 0: nothing.
	FailureCost float64

	// Threshold refuses retries while the bucket holds Threshold tokens or
	// fewer (gRPC A6 uses MaxTokens/2). It must be below MaxTokens. 0: a
	// retry needs only its cost.
	Threshold float64
}

// ThrottleRule is a classification of throttling answers, for
// RatioConfig.Throttles: IsThrottle reports whether a failed attempt's
// error says the server asked the client to slow down.
type ThrottleRule interface {
	// IsThrottle reports whether err, the failure Withdraw is asked to
	// pay a retry after, is a throttling answer, so that the retry costs
	// ThrottleCost. It is called from every goroutine that
	// withdraws, concurrently, and must not block. false: the retry
	// costs TimeoutCost or RetryCost, as for any other failure. A panic
	// goes on to Withdraw's caller, the bucket untouched.
	IsThrottle(err error) bool
}

// GRPC returns the gRPC A6 retry throttling settings gRPC uses by default
// in examples: maxTokens 10, tokenRatio 0.1. See GRPCThrottling.
func GRPC() RatioConfig { return GRPCThrottling(10, 0.1) }

// GRPCThrottling returns the gRPC A6 retry throttling policy for a service
// config's retryThrottling {maxTokens, tokenRatio}: the bucket starts full
// at maxTokens; every failed attempt takes 1 token; every successful one,
// first or retry, adds tokenRatio; retries are refused while the bucket
// holds maxTokens/2 or fewer. A6 allows maxTokens in (0, 1000] and up to 3
// decimal places.
func GRPCThrottling(maxTokens, tokenRatio float64) RatioConfig {
	return RatioConfig{
		MaxTokens:   maxTokens,
		Refill:      tokenRatio,
		RetryRefill: tokenRatio,
		FailureCost: 1,
		Threshold:   maxTokens / 2,
	}
}

// TenPercent returns the "retry at most 10% of traffic" bucket: each
// successful first attempt adds 0.1 token, each retry costs 1, and the
// bucket holds at most 10 tokens and starts full. Once the 10 starting
// tokens are spent, retries are at most a tenth of successful calls; when
// everything fails, retries stop. It equals the zero RatioConfig.
func TenPercent() RatioConfig {
	return RatioConfig{MaxTokens: 10, Refill: 0.1, RetryCost: 1}
}

// Validate reports whether c can make a Ratio. Errors wrap ErrInvalidConfig.
func (c RatioConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// WithDefaults returns c as NewRatio reads it: MaxTokens, Refill,
// RetryCost, TimeoutCost and InitialTokens set to their effective values
// where c leaves them to a default. It fails as Validate does. A budget
// implemented elsewhere (redisstore's shared bucket) uses it to follow
// exactly the rules of a Ratio.
func (c RatioConfig) WithDefaults() (RatioConfig, error) {
	p, err := c.resolve()
	if err != nil {
		return RatioConfig{}, err
	}
	c.MaxTokens, c.InitialTokens = fromUnits(p.max), fromUnits(p.initial)
	c.Refill, c.RetryCost, c.TimeoutCost = fromUnits(p.refill), fromUnits(p.retryCost), fromUnits(p.timeoutCost)
	c.ThrottleCost = fromUnits(p.throttleCost)
	return c, nil
}

// ratioParams are a RatioConfig's effective values in token units.
type ratioParams struct {
	max, initial, refill, retryRefill int64
	retryCost, timeoutCost, failCost  int64
	throttleCost                      int64
	threshold                         int64
	refund                            bool
	throttles                         ThrottleRule // nil: retry.IsThrottle

	// For leases (ratio_lease.go): the reserve never lends its first floor
	// units; a token lease is worth making when it holds tokenUse, a space
	// lease when it holds spaceUse (the largest amount one call takes from
	// either; 0 when no call takes any).
	floor, tokenUse, spaceUse int64
}

func (c RatioConfig) resolve() (ratioParams, error) {
	fields := [...]struct {
		name string
		v    float64
	}{
		{"MaxTokens", c.MaxTokens}, {"InitialTokens", c.InitialTokens},
		{"Refill", c.Refill}, {"RetryRefill", c.RetryRefill},
		{"RetryCost", c.RetryCost}, {"TimeoutCost", c.TimeoutCost}, {"ThrottleCost", c.ThrottleCost},
		{"FailureCost", c.FailureCost}, {"Threshold", c.Threshold},
	}
	for _, f := range fields {
		switch {
		case !finite(f.v) || f.v < 0:
			return ratioParams{}, invalid("RatioConfig.%s is %v, want a finite number >= 0", f.name, f.v)
		case f.v > MaxRatioTokens:
			return ratioParams{}, invalid("RatioConfig.%s is %v, above MaxRatioTokens", f.name, f.v)
		case f.v > 0 && toUnits(f.v) == 0:
			return ratioParams{}, invalid("RatioConfig.%s is %v, below the resolution of 1e-6 token", f.name, f.v)
		}
	}
	p := ratioParams{
		max:          toUnits(c.MaxTokens),
		initial:      toUnits(c.InitialTokens),
		refill:       toUnits(c.Refill),
		retryRefill:  toUnits(c.RetryRefill),
		retryCost:    toUnits(c.RetryCost),
		timeoutCost:  toUnits(c.TimeoutCost),
		throttleCost: toUnits(c.ThrottleCost),
		failCost:     toUnits(c.FailureCost),
		threshold:    toUnits(c.Threshold),
		refund:       c.RefundRetrySuccess,
		throttles:    c.Throttles,
	}
	if p.max == 0 {
		p.max = toUnits(DefaultMaxTokens)
	}
	if p.refill == 0 {
		p.refill = toUnits(DefaultRefill)
	}
	if p.retryCost == 0 && p.failCost == 0 {
		p.retryCost = toUnits(DefaultRetryCost)
	}
	if p.timeoutCost == 0 {
		p.timeoutCost = p.retryCost
	}
	if p.throttleCost == 0 {
		p.throttleCost = p.retryCost
	}
	switch {
	case c.StartEmpty && p.initial != 0:
		return ratioParams{}, invalid("RatioConfig.StartEmpty is set with InitialTokens %v", c.InitialTokens)
	case c.StartEmpty:
	case p.initial == 0:
		p.initial = p.max
	case p.initial > p.max:
		return ratioParams{}, invalid("RatioConfig.InitialTokens %v is above MaxTokens %v", c.InitialTokens, fromUnits(p.max))
	}
	if p.threshold >= p.max {
		return ratioParams{}, invalid("RatioConfig.Threshold %v is not below MaxTokens %v: no retry could ever be granted", c.Threshold, fromUnits(p.max))
	}
	if cost := max(p.retryCost, p.timeoutCost, p.throttleCost); cost > p.max {
		return ratioParams{}, invalid("RatioConfig retry cost %v is above MaxTokens %v: such a retry could never be granted", fromUnits(cost), fromUnits(p.max))
	}
	if min(p.retryCost, p.timeoutCost, p.throttleCost) == 0 {
		// A free retry only reads the balance; while it is lent out it
		// reads the reserve, which keeps enough to answer it.
		p.floor = p.threshold + 1
	}
	if cost := max(p.retryCost, p.timeoutCost, p.throttleCost); cost > 0 {
		p.tokenUse = max(cost, p.threshold+1)
	}
	p.tokenUse = max(p.tokenUse, p.failCost)
	p.spaceUse = max(p.refill, p.retryRefill)
	if p.refund {
		// A priced success (RecordPriced) gives back any of the costs.
		p.spaceUse = max(p.spaceUse, p.retryRefill+max(p.retryCost, p.timeoutCost, p.throttleCost))
	}
	return p, nil
}

// isThrottle applies the bucket's throttle rule.
func (p *ratioParams) isThrottle(err error) bool {
	if p.throttles == nil {
		return retry.IsThrottle(err)
	}
	return p.throttles.IsThrottle(err)
}

func toUnits(x float64) int64   { return int64(math.Round(x * tokenUnit)) }
func fromUnits(u int64) float64 { return float64(u) / tokenUnit }

// Ratio is a retry token bucket, the design of gRPC A6 retry throttling and
// the AWS SDKs' retry quota: successes pay tokens in, retries (or failures)
// take them out, and a retry is refused when the bucket cannot pay. Over
// time the retries granted are at most a fixed ratio of successful calls,
// plus the tokens the bucket started with.
//
// Choose Ratio when retries should follow the downstream's health: when
// most calls fail, it stops retrying almost at once (after its initial
// tokens) and resumes as successes come back, with no notion of time and no
// clock. It suits a client with steady traffic; a client that calls rarely
// may find its bucket empty after a single bad spell (see Window, whose
// floor keeps a few retries per second available).
//
// Make one with NewRatio, from a preset (GRPC, TenPercent,
// awsretry.Standard2026, awsretry.StandardLegacy) or
// a RatioConfig, and share it between every caller of one downstream. A
// Ratio is safe for concurrent use, and exact under it: every Record and
// Withdraw takes effect at one instant between its call and its return, as
// if the calls had run one at a time in that order (it is linearizable), so
// no race grants a retry the definition refuses or loses a token. A nil
// *Ratio grants every retry.
//
// A Ratio costs one atomic compare-and-swap per call that changes its
// balance and none for one that leaves it alone. When calls from several
// cores contend for the balance while it is far from empty and from full,
// the Ratio lends slices of it to per-processor cells, so that most calls
// change only a cell of their own and the cost per call stays flat as cores
// are added; near a limit it takes the slices back and decides on the one
// balance again (see BenchmarkRatio).
type Ratio struct {
	p ratioParams
	_ [128]byte // keeps the read-only parameters off the balance's cache line

	// tokens is the balance, in token units within [0, p.max], or
	// lent (-1) while the balance is split between the lender and the
	// cells' leases. Calls that leave the balance alone only read it.
	tokens atomic.Int64
	_      [120]byte

	lender lender

	// Each cell holds the lease and the counters of Stats of the
	// goroutines running on one P, on cache lines no other core writes
	// (see internal/stripe). Each call adds to exactly one counter.
	cells stripe.Array[ratioCell]
}

// ratioCell is one cell of a Ratio.
type ratioCell struct {
	// lease packs the tokens (high 32 bits) and the free space (low 32
	// bits) lent to this cell; 0 unless the Ratio is lent out.
	lease atomic.Uint64
	// contended counts the compare-and-swaps on the balance this cell's
	// goroutines lost since the Ratio last tried to lend.
	contended atomic.Uint32

	firstOK, firstFailed, retries, granted, refused atomic.Uint64
}

// NewRatio returns a Ratio configured by c. It panics if c.Validate fails.
func NewRatio(c RatioConfig) *Ratio {
	p, err := c.resolve()
	if err != nil {
		panic(err)
	}
	r := &Ratio{p: p}
	r.tokens.Store(p.initial)
	r.lender.after.Store(lendAfter)
	return r
}

// Record takes an attempt's result: a successful first attempt adds Refill,
// a successful retry adds RetryRefill (and RetryCost with
// RefundRetrySuccess: Record cannot know what the retry paid, RecordPriced
// does), a failure takes FailureCost. The bucket never holds more than
// MaxTokens nor less than 0. Record on a nil Ratio does nothing.
func (r *Ratio) Record(retry bool, err error) {
	if r == nil {
		return
	}
	if err != nil || retry {
		r.recordOther(retry, err)
		return
	}
	// A successful first attempt, the common case, without a call: into a
	// full bucket it only reads the balance. fastFirstOK is the same with
	// a stripe hint given.
	c := r.cells.Local()
	c.firstOK.Add(1)
	if t := r.tokens.Load(); t != r.p.max {
		r.add(c, r.p.refill)
	}
}

func init() {
	var x retry.Budget = (*Ratio)(nil)
	fastpath.Budget.FirstOK = fastFirstOK
	fastpath.Budget.Refill = fastRefill
	var r Ratio
	fastpath.Budget.FirstOKs = fastpath.Counter{
		Off:    unsafe.Offsetof(r.cells) + uintptr(unsafe.Pointer(&r.cells.At(0).firstOK)) - uintptr(unsafe.Pointer(&r.cells)),
		Stride: uintptr(unsafe.Pointer(r.cells.At(1))) - uintptr(unsafe.Pointer(r.cells.At(0))),
	}
	fastpath.Budget.Tokens = unsafe.Offsetof(r.tokens)
	fastpath.Budget.Max = unsafe.Offsetof(r.p) + unsafe.Offsetof(r.p.max)
	fastpath.Budget.Tab.Store(fastpath.TypeWord(unsafe.Pointer(&x))) // last: it publishes the functions
}

// fastFirstOK is Record(false, nil) on the Ratio at p (nil: none) in the
// cell of the caller's stripe hint h (internal/fastpath): Record's path for
// a successful first attempt, written out, but for the refill of a bucket
// that is not full, which it leaves to fastRefill (it reports true).
func fastFirstOK(p unsafe.Pointer, h int) bool {
	r := (*Ratio)(p)
	if r == nil {
		return false
	}
	r.cells.For(h).firstOK.Add(1)
	return r.tokens.Load() != r.p.max
}

// fastRefill adds the refill of a successful first attempt that
// fastFirstOK counted to the Ratio at p, in the cell of hint h.
func fastRefill(p unsafe.Pointer, h int) {
	r := (*Ratio)(p)
	r.add(r.cells.For(h), r.p.refill)
}

// recordOther is Record for a failure or a retry.
func (r *Ratio) recordOther(retry bool, err error) {
	r.record(r.cells.Local(), retry, err, r.p.retryCost)
}

// RecordPriced takes the result of a retry attempt whose grant
// WithdrawPriced priced at price: as Record(true, err), except that a
// success with RefundRetrySuccess gives back price, what that retry paid
// (ThrottleCost, TimeoutCost or RetryCost), as the AWS SDKs' retry token
// does. retry.Call uses it (retry.PricedBudget). A price outside
// [0, MaxTokens] is read as the nearest bound. RecordPriced on a nil Ratio
// does nothing.
func (r *Ratio) RecordPriced(err error, price int64) {
	if r == nil {
		return
	}
	r.record(r.cells.Local(), true, err, min(max(price, 0), r.p.max))
}

// record takes an attempt's result; a successful retry gives back refund
// with RefundRetrySuccess.
func (r *Ratio) record(c *ratioCell, retry bool, err error, refund int64) {
	var delta int64
	switch {
	case err == nil && !retry:
		delta = r.p.refill
	case err == nil:
		delta = r.p.retryRefill
		if r.p.refund {
			delta += refund
		}
	case r.p.failCost > 0 && CountsAsFailure(err):
		delta = -r.p.failCost
	}
	switch {
	case retry:
		c.retries.Add(1)
	case err == nil:
		c.firstOK.Add(1)
	default:
		c.firstFailed.Add(1)
	}
	if delta != 0 {
		r.add(c, delta)
	}
}

// add adds delta to the balance, clamped to [0, p.max].
func (r *Ratio) add(c *ratioCell, delta int64) {
	for {
		if t := r.tokens.Load(); t != lent {
			n := min(max(t+delta, 0), r.p.max)
			if n == t || r.tokens.CompareAndSwap(t, n) {
				return
			}
			r.contended(c)
			continue
		}
		if c.add(delta) || r.addLent(c, delta) {
			return
		}
	}
}

// Withdraw asks for a retry after the failure err. It is granted, and its
// cost (ThrottleCost if err is a throttling answer, TimeoutCost if it is a
// timeout, RetryCost otherwise) paid, when the bucket holds at least that
// cost and more than Threshold. Withdraw on a nil Ratio returns true.
func (r *Ratio) Withdraw(err error) bool {
	if r == nil {
		return true
	}
	_, ok := r.withdraw(r.cells.Local(), err)
	return ok
}

// WithdrawPriced is Withdraw, and also returns the cost the granted retry
// paid, in millionths of a token (0 when refused), for RecordPriced:
// retry.Call uses it (retry.PricedBudget), so that a successful retry gets
// back what it paid. WithdrawPriced on a nil Ratio grants at no cost.
func (r *Ratio) WithdrawPriced(err error) (price int64, ok bool) {
	if r == nil {
		return 0, true
	}
	return r.withdraw(r.cells.Local(), err)
}

// withdraw is Withdraw, returning the cost paid when granted.
func (r *Ratio) withdraw(c *ratioCell, err error) (int64, bool) {
	cost := r.p.retryCost
	switch {
	case r.p.throttleCost != cost && r.p.isThrottle(err):
		cost = r.p.throttleCost
	case r.p.timeoutCost != cost && IsTimeout(err):
		cost = r.p.timeoutCost
	}
	// Granted iff the balance holds cost and more than threshold. A
	// refusal only reads the balance, and so does a free retry (cost 0,
	// when only failures pay).
	need := max(cost, r.p.threshold+1)
	var granted bool
	switch t := r.tokens.Load(); {
	case t == lent || t >= need && cost != 0 && !r.tokens.CompareAndSwap(t, t-cost):
		granted = r.takeSlow(c, cost, need)
	default:
		granted = t >= need
	}
	if granted {
		c.granted.Add(1)
		return cost, true
	}
	c.refused.Add(1)
	return 0, false
}

// takeSlow takes cost from the balance if it holds at least need (>= cost),
// after a lost compare-and-swap or while the balance is lent out.
func (r *Ratio) takeSlow(c *ratioCell, cost, need int64) bool {
	for {
		if t := r.tokens.Load(); t != lent {
			if t < need {
				return false
			}
			if cost == 0 || r.tokens.CompareAndSwap(t, t-cost) {
				return true
			}
			r.contended(c)
			continue
		}
		if cost == 0 && r.lender.reserve.Load() >= need || c.take(cost, need) {
			return true
		}
		if granted, decided := r.takeLent(c, cost, need); decided {
			return granted
		}
	}
}

// Available returns the tokens in the bucket, for metrics
// (stormguard_retry_budget_tokens). It is exact when no call is under way;
// while the balance is lent out and calls are under way it adds up the
// leases one by one, so it may be off by the calls made meanwhile. A nil
// Ratio reports +Inf.
func (r *Ratio) Available() float64 {
	if r == nil {
		return math.Inf(1)
	}
	if t := r.tokens.Load(); t != lent {
		return fromUnits(t)
	}
	return fromUnits(r.lentBalance())
}

// Stats returns the Ratio's counters. Deposits counts successful first
// attempts.
//
// Once no call is under way the counters are exact. While calls are under
// way, each counter is a sum of per-processor cells each read atomically:
// it counts some of the concurrent calls and not others, so the counters
// may be a few calls apart (Granted+Refused need not match the Withdraw
// calls of any one instant), but none ever decreases from one Stats to the
// next. A nil Ratio reports zeros.
func (r *Ratio) Stats() Stats {
	if r == nil {
		return Stats{}
	}
	var s Stats
	for i := range stripe.N {
		c := r.cells.At(i)
		ok := c.firstOK.Load()
		s.Deposits += ok
		s.Requests += ok + c.firstFailed.Load()
		s.Retries += c.retries.Load()
		s.Granted += c.granted.Load()
		s.Refused += c.refused.Load()
	}
	return s
}
