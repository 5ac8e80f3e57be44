// Package hedge sends a second copy of a slow call before the first has
// failed, and returns the first answer — hedged requests, after Dean and
// Barroso's "The Tail at Scale" (CACM 2013) — without letting the copies
// become the next outage: hedges are attempts of the call under the same
// retry.Policy as its retries.
//
//	h := &hedge.Hedger{Policy: policy, Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{})}
//	v, err := hedge.Do(ctx, h, op, release)
//
// # What a call does
//
// The first attempt runs in the calling goroutine. When it has not
// answered within the delay, a hedge starts in a goroutine of its own, and
// another after each further delay, up to Hedger.MaxHedges (default 1).
// The delay is Hedger.Delay (default 100ms) or, with an Adaptive, a
// percentile (default p95) of recent latencies over a sliding window
// (default 10s), never below a floor (default 1ms); the attempts Do
// cancels unanswered count as censored samples, so that the percentile is
// not biased low by the tail hedging cuts off.
// Hedge timers on the real clock are shared by all calls (a call that
// answers first costs no runtime timer), and never go off early.
//
// An attempt that returns a nil error wins: the others are cancelled
// through their contexts, Do waits for them to return, hands every value
// it does not return to release (a loser's response body is closed), and
// returns the winner's. An error the Policy would not retry (Permanent,
// rejected by Classify, the caller's own end) is fatal and stops the call
// the same way. Overload pushback (retry.Overloaded) stops further hedges
// but lets the copies in flight answer, and is never retried; a server's
// advised delay (retry.After) puts the next hedge off by at least that
// delay, and advice beyond Policy.MaxRetryAfter stops further hedges.
// Any other failure lets the remaining attempts run; when none is left
// and none answered, the call retries exactly as retry.Do would —
// backoff, the longest advice any copy of the round gave, deadline,
// MaxElapsed, breaker, budget. MaxHedges bounds the hedges of the whole
// call, not of each round: a retry is hedged only while the call has
// hedges left, so under the default MaxHedges of 1 a retry after a hedged
// round is not hedged.
//
// # One budget for retries and hedges
//
// A hedge is an attempt like a retry, and pays like one:
//
//   - Policy.AttemptLimit() bounds the first attempt, the hedges and the
//     retries of one call together.
//   - Before a hedge, the Breaker's Ready, then the Budget's Withdraw
//     (hearing ErrHedge), then Begin: the Breaker's Allow and a
//     BudgetTracker's Start, exactly as for a retry; its result goes to
//     the Observer, the Breaker and the Budget's Record as a retry's.
//   - Once the budget or the breaker refuses a hedge, the call starts no
//     further hedge, but the attempts already running go on (unlike a
//     budget that cancels them, which turns a brownout into errors).
//   - A cancelled loser ends with an error marked ErrLost, Permanent and
//     context.Canceled: budgets do not charge it, breakers exclude it, and
//     the Observer hears its attempt end as OutcomeCanceled.
//   - The layer rule holds: under NestedOneLayer a call whose inbound
//     caller retries is not hedged. A Policy with a Limiter is not hedged.
//
// # Observability
//
// The retry.Observer sees every attempt (a hedge has Attempt > 1, a
// retry's attempt_kind). An Observer that also implements hedge.Observer,
// or a member of a retry.Multi that does, hears HedgeStarted, HedgeWon,
// HedgeCancelled and HedgeRefused.
//
// # Panics
//
// A panic in op, in the calling goroutine or in a hedge's, is handled as
// retry.Do handles it: the other attempts are cancelled and waited for,
// the attempt is reported failed with a *retry.PanicError (Call.Panic),
// held values are released, and the panic goes on in the calling
// goroutine. So does a panic of a Policy callback, a release or the
// Policy's Clock (see Do): the call ends for the Observer, the Breaker and
// the Budget, a retry already granted is refunded, and no goroutine or
// timer of the call is left.
//
// # HTTP
//
// Transport hedges requests that Hedgeable accepts — idempotent by
// httpretry.Idempotent's rule, with a replayable body — and sends any
// other exactly once. The servers see a cancelled copy's request context
// end (HTTP/1: its connection closes; HTTP/2: its stream is reset).
package hedge
