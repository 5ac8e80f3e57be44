package hedge

import (
	"context"
	"errors"
	"time"

	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// Hedger hedges calls made under a retry Policy: when no attempt has
// answered within the delay, it starts another, up to MaxHedges, and the
// first acceptable answer wins. Every field is optional; a zero Hedger
// hedges once, after DefaultDelay, under the zero Policy.
//
// Hedges are attempts of the call like its retries: they count against
// the Policy's attempt limit (attempts, hedges and retries together never
// exceed Policy.AttemptLimit()), spend from its Budget (Withdraw, and
// Start/Refund for a BudgetTracker) as a retry would, ask its Breaker, and
// are reported to its Observer. Once the Budget or the Breaker refuses a
// hedge, the call starts no further hedge, but attempts already running
// go on. The layer rule (Policy.Nested) applies to hedges as to retries:
// when the inbound caller retries itself, a call under NestedOneLayer
// makes one attempt, unhedged, and under NestedBudget each hedge also
// withdraws from Policy.NestedBudget. A Policy with a Limiter is not
// hedged (its Acquire may wait, and a hedge that has to wait for
// admission is not worth sending).
//
// A Hedger must not be modified while calls are using it; it is otherwise
// safe for concurrent use.
type Hedger struct {
	// Policy governs the call: attempts, backoff between retries, budget,
	// breaker, observer, clock, classification, the layer rule. It is
	// asked once per call (a *retry.Policy gives itself, a config.Handle
	// the policy last loaded). nil: the zero Policy.
	Policy retry.PolicySource

	// Delay is how long an attempt may go unanswered before a hedge
	// starts, when Adaptive is nil or does not have enough samples yet.
	// 0 (or negative): DefaultDelay. On the real clock a hedge never
	// starts before its delay; a delay of 16ms or more is timed by a
	// shared 1ms tick (no clock read per call), so its hedge may start up
	// to about 1ms after it, on top of the runtime timer's own lateness.
	Delay time.Duration

	// Adaptive, when set, gives the delay from recent latencies (a
	// percentile over a sliding window, with a floor), and Do feeds it
	// the latency of every attempt that answered and the running time of
	// every attempt it cancelled unanswered (Adaptive.ObserveUnanswered).
	// Share one per downstream operation.
	Adaptive *Adaptive

	// Adaptives, when set, gives each call the Adaptive of its key
	// (keyed.KeyFrom of the call's context; the group's default member
	// for none) in place of Adaptive: one delay per host. See
	// NewAdaptives.
	Adaptives *keyed.Group[*Adaptive]

	// MaxHedges bounds the hedges one call starts (attempts started
	// because of a delay, not after a failure). 0: DefaultMaxHedges (1).
	// NoHedges (any negative value): none; Do then makes the call as
	// retry.Do would, and still hands every failed attempt's value it
	// does not return to release.
	MaxHedges int
}

// Defaults of Hedger.
const (
	// DefaultDelay is the fixed delay of a zero Hedger.Delay. Hedging at
	// once (gRFC A6's hedgingDelay of 0) doubles the load and is never a
	// default.
	DefaultDelay = 100 * time.Millisecond
	// DefaultMaxHedges is the hedge limit of a zero MaxHedges.
	DefaultMaxHedges = 1
	// NoHedges, as MaxHedges, turns hedging off.
	NoHedges = -1
)

var (
	// ErrHedge is the error the Policy's Budget.Withdraw hears when a
	// hedge asks for budget: no attempt answered within the delay.
	ErrHedge = errors.New("hedge: no answer within the hedge delay")
	// ErrLost marks the error of an attempt cancelled because another
	// answered first (or a fatal result stopped the call). Such an
	// error is also marked retry.Permanent and matches
	// context.Canceled, so budgets do not charge it and breakers
	// exclude it.
	ErrLost = errors.New("hedge: attempt cancelled, another answered first")
)

var zeroHedger Hedger

// Do calls op as retry.Do does, under h.Policy, and hedges it: whenever
// the attempts in flight have gone unanswered for the delay, it starts
// another, while h.MaxHedges, the attempt limit, the budget and the breaker
// allow. It returns the first acceptable result; a nil h is the zero
// Hedger.
//
// Results: an attempt that returns a nil error is acceptable and wins. An
// error the Policy would not retry (Permanent, rejected by Classify or
// DefaultClassifier, or the caller's own end) is fatal: it stops the call
// at once. Overload pushback (retry.Overloaded, gRFC A6's negative
// grpc-retry-pushback-ms) stops further hedges, lets the copies in flight
// answer, and is never retried; advice with a delay (retry.After, A6's
// positive pushback) puts the next hedge off by at least that delay
// (never less than an earlier copy of the round asked), and advice beyond
// Policy.MaxRetryAfter starts no further hedge, as it starts no retry.
// Any other error is not fatal: the call waits for the attempts still in
// flight, and when none is left and none answered, it retries as retry.Do
// would (backoff, the longest advice of the round's copies, deadline,
// MaxElapsed, breaker, budget). The retry is hedged only while the call
// has hedges left: h.MaxHedges bounds the hedges of the whole call, so
// with one hedge a retry after a hedged round is not hedged. Hedges do
// not multiply the retry schedule: retries happen only when nothing is in
// flight, and no hedge starts past Policy.MaxElapsed or the caller's
// deadline less Policy.MinAttemptTime.
//
// When an attempt wins or is fatal, the others are cancelled through
// their contexts, and Do returns once all of them have returned (op must
// return promptly when its context ends, as for retry.Do). release, when
// not nil, is called exactly once with every value an attempt returned
// that Do does not return — a loser's, or a failed attempt's superseded by
// a later one — for example to close a response body; it must accept a
// zero value.
//
// Every attempt's context is cancelled by the time Do returns, the
// winner's included, so nothing the winner hands back may keep using it
// (RoundTrip shows how an HTTP response keeps its context until its body
// is closed). The first attempt of each round runs in the calling
// goroutine; hedges run in goroutines of their own, all of which have
// ended when Do returns. A panic in op is reported as retry.Do reports it
// (Call.Panic: Observer, breaker and budget see the attempt fail), the
// other attempts are cancelled and waited for, held values are released,
// and the panic goes on in the calling goroutine (a hedge's panic too).
// So does a Policy callback that panics in the call's steps between
// attempts (Classify, the Observer, the Backoff, a breaker listener, the
// Clock's NewTimer in the backoff wait): the call ends with
// retry.ReasonPanic as retry.Call ends it (see Call.End, Call.Next,
// Call.Begin; a retry the budget granted is refunded), every value Do
// holds is released, the value of the attempt that just returned
// included, and every attempt's context is cancelled. With an Adaptive
// delay, the Clock is read as each attempt returns: a Clock that panics
// there fails that attempt as a panic in op would. A callback that panics
// on a goroutine of Do's (on the timer's: the Clock, Breaker.Ready,
// Budget.Withdraw or a Refund, a hedge Observer; on a hedge's: the Clock,
// Classify, an Observer) stops the call the same way (no further hedge or
// retry; the attempts still running are cancelled and waited for; the
// call ends with retry.ReasonPanic), and its panic goes on in the calling
// goroutine: a panic of the Observer's CallEnd or of a Refund as the call
// ends does not replace it.
// A panic in release, on any goroutine, stops the call the same way (no
// further hedge or retry; the attempts still running are cancelled and
// waited for): the call ends for the Observer, breaker and budget as its
// attempts decided (success with a winner, otherwise given up as
// retry.ReasonPermanent, or retry.ReasonPanic if a callback panics as it
// is given up), every other value Do holds is released, the
// winner's included, and the first such panic goes on in the calling
// goroutine.
func Do[T any](ctx context.Context, h *Hedger, op func(context.Context) (T, error), release func(T)) (T, error) {
	v, _, err := do(ctx, h, op, release, false)
	return v, err
}
