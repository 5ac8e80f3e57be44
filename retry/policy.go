package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
)

// Policy configures Do. Every field is optional; the zero value makes at
// most DefaultMaxAttempts (3) attempts, retrying transient errors with
// full-jitter exponential backoff (100ms … 10s). A nil Policy is the zero
// Policy. Retrying without a count limit is never a default: ask for it
// with MaxAttempts: Unlimited.
//
// A Policy must not be modified while calls are using it; it is otherwise
// safe for concurrent use, and its Budget and Breaker are meant to be shared
// by every caller of one downstream.
type Policy struct {
	// Operation names the call in Observer events and metrics. Keep the set
	// of names small and fixed (one per downstream operation).
	Operation string

	// MaxAttempts bounds the number of attempts, the first included.
	// 0: DefaultMaxAttempts (3). Unlimited (any negative value): no count
	// limit, an explicit choice; Do then stops on the context, MaxElapsed,
	// the budget, the breaker or a permanent error.
	MaxAttempts int

	// MaxElapsed bounds the whole call: no retry starts (or waits) past
	// start+MaxElapsed. It combines with the caller's deadline; the earlier
	// one applies. Running attempts are not cut short by it. 0: no bound.
	MaxElapsed time.Duration

	// Backoff computes the wait before each retry. nil: DefaultBackoff.
	Backoff backoff.Strategy

	// AttemptTimeout bounds each attempt. An attempt that runs out of its own
	// time (its error matches ErrAttemptTimeout) is retryable whatever
	// Classify says, unless it is marked Permanent; the caller's deadline
	// never is. 0: no bound.
	AttemptTimeout time.Duration

	// MinAttemptTime is the least time worth giving an attempt. When the
	// caller's deadline cannot hold the next wait plus MinAttemptTime, Do
	// stops at once with ErrDeadlineTooClose (which also matches
	// context.DeadlineExceeded). 0: stop only when the wait alone does not
	// fit.
	MinAttemptTime time.Duration

	// MaxRetryAfter caps a server's advised delay (After, Retry-After,
	// gRPC pushback). Advice up to the cap raises the wait to at least what
	// the server asked; advice beyond it stops the call with
	// ErrAdviceExceedsCap (ReasonAdvice), since coming back at the cap
	// would be sooner than the server asked. 0: DefaultMaxRetryAfter.
	// Negative: ignore advice.
	MaxRetryAfter time.Duration

	// Classify reports whether a failed attempt's error is worth retrying.
	// nil: DefaultClassifier. Errors marked Permanent are never retried and
	// the caller's own cancellation never is, whatever Classify says; an
	// attempt cut by AttemptTimeout always is (Classify is not asked). The
	// Budget hears an error Classify rejects marked Permanent, so it does
	// not charge it. An attempt that panicked (a *PanicError) is a
	// failure whatever Classify says, and Classify is not asked about it.
	Classify func(error) bool

	// Budget, shared by all callers of one downstream, caps retries as a
	// share of traffic. nil: no budget.
	Budget Budget

	// Breaker, shared likewise, fails calls fast while the downstream is
	// down. nil: no breaker.
	Breaker Breaker

	// Limiter admits each attempt on the client side before it is sent
	// (adaptive throttling, a client rate limiter): Begin asks it before
	// the breaker, and a refusal ends the call with ReasonThrottled and
	// the limiter's error as sentinel. nil: none.
	Limiter Limiter

	// Nested is the layer rule: what the call does when the inbound
	// request that caused it comes from a caller that retries it
	// (InboundOf(ctx).Retries, set by server middleware). The zero value,
	// NestedOneLayer, makes one attempt and leaves retrying to the caller.
	Nested NestedRule

	// NestedBudget grants the retries a call may still make under
	// NestedBudget; keep it small and separate from Budget. nil with
	// NestedBudget: no retries. It hears the calls the rule governs as
	// Budget hears every call: Record after each attempt, Withdraw before
	// each retry and, for a BudgetTracker, Start before each attempt and
	// Refund for a granted retry that does not start (Budget refused it,
	// the caller gave up during the wait, the Limiter or the breaker
	// refused it, or a callback panicked).
	NestedBudget Budget

	// Clock measures and waits. nil: clock.Real.
	Clock clock.Clock

	// Rand jitters server-advised delays. nil: math/rand/v2's generator.
	// Any source may be shared by concurrent calls: backoff.NewSource's is
	// drawn from without a lock, any other under a lock (backoff.Uniform).
	Rand rand.Source

	// Observer is told about every attempt, wait and give-up. nil: none,
	// at no cost.
	Observer Observer
}

// Defaults used for zero Policy fields.
const (
	DefaultMaxRetryAfter = 30 * time.Second
	// DefaultMaxAttempts is the attempt limit of a zero MaxAttempts, as in
	// the AWS SDKs' standard mode, failsafe-go and Polly.
	DefaultMaxAttempts = 3
	// Unlimited, as MaxAttempts, asks for no count limit.
	Unlimited = -1
)

// AttemptLimit returns the most attempts p allows, the first included, as
// Do reads MaxAttempts: DefaultMaxAttempts for 0, -1 for no count limit
// (Unlimited or any negative value). A nil Policy is the zero Policy.
func (p *Policy) AttemptLimit() int {
	switch {
	case p == nil || p.MaxAttempts == 0:
		return DefaultMaxAttempts
	case p.MaxAttempts < 0:
		return -1
	}
	return p.MaxAttempts
}

// DefaultBackoff is used when Policy.Backoff is nil: exponential from 100ms,
// doubling, capped at 10s, with full jitter.
var DefaultBackoff backoff.Strategy = backoff.Exponential{
	Base:   100 * time.Millisecond,
	Max:    10 * time.Second,
	Jitter: backoff.Full,
}

// Budget decides whether a retry may be made. The budget package provides
// the ratio token bucket (gRPC A6, AWS SDK), the time-windowed budget
// (Finagle) and the concurrency budget (Envoy); users may write their own.
// Implementations are shared by every caller of a downstream and must be
// safe for concurrent use. A nil Budget means unlimited.
//
// Do calls Record after every attempt and Withdraw before every retry's
// wait; budgets that also need attempt starts or refunds implement
// BudgetTracker.
type Budget interface {
	// Record reports how an attempt ended: retry is false for a call's first
	// attempt, err is nil on success.
	Record(retry bool, err error)
	// Withdraw asks for one retry after the failure err. False refuses it,
	// and Do returns at once with ErrBudgetExhausted.
	Withdraw(err error) bool
}

// BudgetTracker is implemented by budgets that follow attempts in flight
// (such as the concurrency budget). Do calls Start before every attempt and
// Refund when a withdrawn retry is abandoned before it started (the caller
// gave up during the wait, the Limiter or the breaker refused it, or a
// callback panicked). A NestedBudget that implements it hears the same for
// the calls its layer rule governs.
type BudgetTracker interface {
	Budget
	// Start is called when an attempt begins, once the Limiter and the
	// breaker have admitted it; retry is false for a call's first
	// attempt. Record follows for the same attempt when it ends. It is
	// called from every calling goroutine at once. A panic ends the
	// attempt as failed and the call with ReasonPanic, and goes on.
	Start(retry bool)
	// Refund gives back one retry that Withdraw granted and no attempt
	// used; it is called at most once per grant, never for a grant an
	// attempt started with, and concurrently with the other methods. A
	// panic goes on (or is dropped while another panic is under way);
	// a NestedBudget still hears its own Refund.
	Refund()
}

// ErrorBackoff is implemented by a Policy.Backoff whose wait depends on the
// failure it follows, such as the AWS SDKs' 2026 standard rules (a 1 s base
// after a throttling answer, x-amz-retry-after clamped to the computed
// wait; awsretry.Rules). Do then calls DelayAfter with the failed
// attempt's error instead of Delay. Server advice marked with After still
// raises the wait afterwards.
type ErrorBackoff interface {
	backoff.Strategy
	// DelayAfter returns the wait before retry n (1 for the first) after
	// the failure err; prev is the previous wait returned (0 at first).
	DelayAfter(n int, prev time.Duration, err error) time.Duration
}

// Limiter admits attempts on the client side, before they cost the
// downstream anything: throttle.SRE rejects a share of them while the
// downstream refuses many, throttle.Adaptive waits for a token of a
// CUBIC-driven rate. A nil Limiter means none.
type Limiter interface {
	// Acquire asks to send one attempt (retry is false for a call's
	// first). It may wait, never past ctx's end. On refusal it returns a
	// non-nil error and Do stops with it as the sentinel
	// (ReasonThrottled). Otherwise done must be called exactly once with
	// the attempt's result — Do does so also when the breaker then
	// refuses the attempt (with the breaker's error) and when the attempt
	// panics.
	Acquire(ctx context.Context, retry bool) (done func(err error), err error)
}

// Breaker is a circuit breaker as seen by Do; breaker.Breaker implements it.
// A nil Breaker means none. One that also implements PrebuiltRefusal makes
// a refused call free of allocation.
type Breaker interface {
	// Allow asks to make one attempt. On refusal it returns a non-nil error
	// (breaker.ErrOpen or breaker.ErrTooManyProbes) and Do stops with it as
	// the sentinel. Otherwise done must be called exactly once with the
	// attempt's result.
	Allow() (done func(err error), err error)
	// Ready reports, without taking a probe permit, the error Allow would
	// return now, or nil. Do checks it before spending budget on a wait.
	Ready() error
}
