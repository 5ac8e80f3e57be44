package simtest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// Kind is the kind of a failed attempt, as the downstream model answers
// it: each maps to the HTTP status and the gRPC code a real client would
// see, so that a policy's retry_on, preset classification, budget costs,
// breaker and limiter judge it as they judge the real answer.
type Kind uint8

// Failure kinds of the downstream model.
const (
	// KindNone: the attempt succeeded.
	KindNone Kind = iota
	// KindTimeout: the attempt timed out (the attempt_timeout, or the
	// downstream's client timeout). Always retried, as
	// retry.Policy.AttemptTimeout promises whatever Classify says.
	KindTimeout
	// KindUnavailable: 503 Service Unavailable, gRPC UNAVAILABLE: the
	// gateway restarting (the outage storm).
	KindUnavailable
	// KindQueueFull: 503 Service Unavailable, gRPC UNAVAILABLE, answered
	// at once by a full queue.
	KindQueueFull
	// KindServer: 500 Internal Server Error, gRPC INTERNAL (the errors
	// storms).
	KindServer
	// KindThrottled: 429 Too Many Requests, gRPC RESOURCE_EXHAUSTED (the
	// throttle storm: the downstream's quota refuses attempts).
	KindThrottled
)

var kindNames = [...]string{"ok", "timeout", "503 unavailable", "503 queue full", "500 server error", "429 throttled"}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// HTTPStatus is the status a real HTTP client sees for k (0: none, the
// attempt got no response).
func (k Kind) HTTPStatus() int {
	switch k {
	case KindUnavailable, KindQueueFull:
		return http.StatusServiceUnavailable
	case KindServer:
		return http.StatusInternalServerError
	case KindThrottled:
		return http.StatusTooManyRequests
	}
	return 0
}

// GRPCCode is the canonical gRPC status name a real gRPC client sees for
// k ("" for success).
func (k Kind) GRPCCode() string {
	switch k {
	case KindTimeout:
		return "DEADLINE_EXCEEDED"
	case KindUnavailable, KindQueueFull:
		return "UNAVAILABLE"
	case KindServer:
		return "INTERNAL"
	case KindThrottled:
		return "RESOURCE_EXHAUSTED"
	}
	return ""
}

// kindOf returns the kind of a simulator error in a storm whose 500s are
// 429s (throttle).
func kindOf(err error, throttle bool) Kind {
	switch {
	case err == nil:
		return KindNone
	case errors.Is(err, retry.ErrAttemptTimeout):
		return KindTimeout
	case errors.Is(err, sim.ErrOverloaded):
		return KindQueueFull
	case errors.Is(err, sim.ErrUnavailable):
		return KindUnavailable
	case errors.Is(err, sim.ErrServer):
		if throttle {
			return KindThrottled
		}
		return KindServer
	}
	return KindServer
}

// Answer is the error a failed attempt carries to the policy's Classify,
// budget, breaker and limiter in the simulation: the kind, an
// httpretry.StatusError for the HTTP status (what httpretry hands a
// policy), the simulator's own error, and, for a timeout,
// retry.ErrAttemptTimeout.
type Answer struct {
	// Kind is how the downstream model answered the attempt (never
	// KindNone: a succeeded attempt carries no Answer).
	Kind Kind
	// Status is the HTTP status error of Kind, with a bodiless Response;
	// nil for a timeout, which got no response.
	Status *httpretry.StatusError
	sim    error
}

// Error names the kind.
func (a *Answer) Error() string { return "simtest: " + a.Kind.String() }

// Unwrap returns the status error and the simulator's error.
func (a *Answer) Unwrap() []error {
	if a.Status == nil {
		return []error{a.sim}
	}
	return []error{a.Status, a.sim}
}

// answer turns a simulator error into an Answer (nil stays nil; the
// overload marker stays as it is).
func answer(err error, throttle bool) error {
	if err == nil || retry.IsOverloaded(err) || errors.Is(err, context.Canceled) {
		return err
	}
	k := kindOf(err, throttle)
	a := &Answer{Kind: k, sim: err}
	if s := k.HTTPStatus(); s != 0 {
		a.Status = &httpretry.StatusError{StatusCode: s, Response: &http.Response{StatusCode: s, Status: http.StatusText(s), Header: http.Header{}}}
	}
	return a
}

// classifier says whether a policy retries a failed attempt's Answer.
// nil: everything the simulator answers is retried.
type classifier func(error) bool

// grpcClassifier retries the kinds whose gRPC code is in codes (and
// timeouts, always).
func grpcClassifier(codes []string) classifier {
	return func(err error) bool {
		var a *Answer
		if !errors.As(err, &a) {
			return true
		}
		return a.Kind == KindTimeout || slices.Contains(codes, a.Kind.GRPCCode())
	}
}

// retried reports whether c retries err, as retry.Call does: Permanent
// never, an attempt timeout always, otherwise Classify (nil: the default
// classifier).
func (c classifier) retried(err error) bool {
	if retry.IsPermanent(err) || retry.IsOverloaded(err) {
		return false
	}
	if errors.Is(err, retry.ErrAttemptTimeout) {
		return true
	}
	if c == nil {
		return retry.DefaultClassifier(err)
	}
	return c(err)
}

// errNotRetried is what the classifying breaker's Ready answers for the
// attempt that just failed with an error the policy does not retry: the
// simulator then ends the call without a retry, as retry.Do does.
var errNotRetried = errors.New("simtest: not retried (retry_on)")

// seams is what one storm run wraps around a client's budget, breaker
// and limiter: every error they hear is an Answer, a failure the
// policy's classification rejects ends the call, and the hedges granted
// are counted.
type seams struct {
	throttle bool       // the storm's 500s are 429s
	classify classifier // nil: every failure is retried
	counts   *runCounts
}

// runCounts are counted by the seams of one run (single-threaded).
type runCounts struct {
	hedges, stormHedges float64 // hedges sent; of them during the trigger
	notRetried          float64 // failures the classification did not retry
	from, to            time.Duration
}

// classBreaker wraps a client's breaker (inner, possibly nil): it hears
// Answers, and its Ready refuses the retry of an attempt that just failed
// with an error the policy does not retry.
type classBreaker struct {
	inner  retry.Breaker
	s      *seams
	clk    clock.Clock
	stop   bool // the attempt that just ended is not retried
	stopAt time.Time
}

func (b *classBreaker) Allow() (func(error), error) {
	b.stop = false
	var done func(error)
	if b.inner != nil {
		d, err := b.inner.Allow()
		if err != nil {
			return nil, err
		}
		done = d
	}
	return func(err error) {
		err = answer(err, b.s.throttle)
		if err != nil && !errors.Is(err, context.Canceled) && !b.s.classify.retried(err) {
			b.stop, b.stopAt = true, b.clk.Now()
			b.s.counts.notRetried++
		}
		if done != nil {
			done(err)
		}
	}, nil
}

func (b *classBreaker) Ready() error {
	if b.stop && b.clk.Now().Equal(b.stopAt) {
		b.stop = false
		return errNotRetried
	}
	b.stop = false
	if b.inner == nil {
		return nil
	}
	return b.inner.Ready()
}

// seamBudget wraps a client's budget (inner, possibly nil: every retry
// granted): it hears Answers, a failure the policy does not retry marked
// Permanent (as retry.Call tells a budget), and counts the hedges it
// grants.
type seamBudget struct {
	inner retry.Budget
	s     *seams
	clk   clock.Clock
	start time.Time // the run's zero
}

func (b *seamBudget) Record(isRetry bool, err error) {
	if b.inner == nil {
		return
	}
	err = answer(err, b.s.throttle)
	if err != nil && !errors.Is(err, context.Canceled) && !retry.IsOverloaded(err) && !b.s.classify.retried(err) {
		err = retry.Permanent(err)
	}
	b.inner.Record(isRetry, err)
}

func (b *seamBudget) Withdraw(err error) bool {
	ok := true
	if b.inner != nil {
		ok = b.inner.Withdraw(answer(err, b.s.throttle))
	}
	if ok && errors.Is(err, hedge.ErrHedge) {
		c := b.s.counts
		c.hedges++
		if t := b.clk.Since(b.start); t >= c.from && t < c.to {
			c.stormHedges++
		}
	}
	return ok
}

// seamTracker is seamBudget over a retry.BudgetTracker.
type seamTracker struct {
	seamBudget
	tr retry.BudgetTracker
}

func (b *seamTracker) Start(isRetry bool) { b.tr.Start(isRetry) }
func (b *seamTracker) Refund()            { b.tr.Refund() }

func (s *seams) budget(inner retry.Budget, env sim.Env) retry.Budget {
	sb := seamBudget{inner: inner, s: s, clk: env.Clock, start: env.Clock.Now()}
	if tr, ok := inner.(retry.BudgetTracker); ok {
		return &seamTracker{seamBudget: sb, tr: tr}
	}
	return &sb
}

// seamLimiter wraps a limiter so that its done hears Answers.
type seamLimiter struct {
	inner retry.Limiter
	s     *seams
}

func (l *seamLimiter) Acquire(ctx context.Context, isRetry bool) (func(error), error) {
	done, err := l.inner.Acquire(ctx, isRetry)
	if err != nil {
		return nil, err
	}
	return func(err error) { done(answer(err, l.s.throttle)) }, nil
}

// noWaitLimiter asks a limiter that may wait (a throttle.Adaptive built
// in Go, on the run's clock) with a deadline of now, so that it refuses
// (throttle.ErrWaitTooLong) instead of waiting on a timer the blocked run
// would never fire.
type noWaitLimiter struct {
	inner retry.Limiter
	clk   clock.Clock
}

func (l *noWaitLimiter) Acquire(ctx context.Context, isRetry bool) (func(error), error) {
	return l.inner.Acquire(nowDeadline{ctx, l.clk.Now()}, isRetry)
}

// nowDeadline is ctx with the deadline dl, measured on the run's clock
// (context.WithDeadline would measure it on the wall clock).
type nowDeadline struct {
	context.Context
	dl time.Time
}

func (c nowDeadline) Deadline() (time.Time, bool) { return c.dl, true }
