package awssdk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// ErrDeadlineTooClose is the error GetRetryToken returns when the
// caller's deadline cannot hold the wait before the next retry plus
// Policy.MinAttemptTime. It matches retry.ErrDeadlineTooClose (and so
// context.DeadlineExceeded).
var ErrDeadlineTooClose = fmt.Errorf("awssdk: %w", retry.ErrDeadlineTooClose)

// ErrBudgetExhausted is the error GetRetryToken returns when the Policy's
// Budget refuses a retry. It matches retry.ErrBudgetExhausted; the SDK
// joins it with the failed attempt's error (errors.Join), so the
// operation's error matches both.
var ErrBudgetExhausted = fmt.Errorf("awssdk: %w", retry.ErrBudgetExhausted)

// ErrAdviceExceedsCap is the error GetRetryToken returns when the failed
// attempt's x-amz-retry-after asks for a longer wait than
// Policy.MaxRetryAfter: coming back sooner than the server asked is not
// retried. It matches retry.ErrAdviceExceedsCap; the SDK joins it with
// the failed attempt's error.
var ErrAdviceExceedsCap = fmt.Errorf("awssdk: %w", retry.ErrAdviceExceedsCap)

// Retryer is an aws.RetryerV2 that runs the AWS SDK's attempts under a
// stormguard retry.Policy. The SDK keeps its retry loop (the Retry
// middleware) and asks the Retryer at each step:
//
//   - MaxAttempts: the Policy's AttemptLimit (0, no count limit, when the
//     Policy asks for retry.Unlimited);
//   - GetAttemptToken, before every attempt: the Policy's Limiter, then
//     its Breaker (a refusal fails the operation at once, with the
//     refusal's error: throttle.ErrThrottled, breaker.ErrOpen, …), the
//     BudgetTracker's Start and the Observer's AttemptStart; the token's
//     release, after the attempt, reports its result to each of them and
//     records a first attempt with the Budget (Record(false, err));
//   - IsErrorRetryable: never an error marked retry.Permanent, always an
//     attempt cut by AttemptTimeout, else the Policy's Classify (nil:
//     awsretry.IsRetryable);
//   - GetRetryToken, before every retry: the Breaker's Ready, the layer
//     rule (ErrNestedRetry), the x-amz-retry-after advice against
//     MaxRetryAfter (ErrAdviceExceedsCap), MaxElapsed and the caller's
//     deadline (ErrElapsed, ErrDeadlineTooClose; with the middleware),
//     then the Budget's WithdrawPriced (retry.PricedBudget) or Withdraw;
//     a refusal returns ErrBudgetExhausted and the operation fails. The
//     token's
//     release, after the retry, records it (RecordPriced, or Record(true,
//     err)), so that a successful retry gets back what it paid, as the
//     SDK's own quota does;
//   - RetryDelay: the Policy's Backoff after the failure (DelayAfter when
//     it is a retry.ErrorBackoff, such as awsretry.Rules; nil:
//     awsretry.Rules{}), and the Observer's RetryScheduled.
//
// The SDK applies the x-amz-retry-after header itself, after RetryDelay:
// the wait it sleeps is the advice clamped to [delay, delay + 5 s], the
// rule of awsretry.Rules.DelayAfter. The SDK's errors carry no
// retry.HeaderReporter, so DelayAfter returns the computed backoff alone
// and the advice is applied once. Policy.MaxRetryAfter governs the advice
// (read as awsretry.RetryAfter reads it: a value beyond 24 h, or beyond
// int64, is 24 h) as it governs advice in retry.Do: an advice longer than
// MaxRetryAfter (0: retry.DefaultMaxRetryAfter, 30 s) is not retried
// (GetRetryToken returns ErrAdviceExceedsCap, the CallEnd reason is
// ReasonAdvice), since the SDK would come back sooner than the server
// asked; a negative MaxRetryAfter ignores the advice (the SDK waits the
// delay alone); an advice within the cap gets the SDK's clamp. To make
// the SDK apply exactly that, RetryDelay rewrites the header of the
// failed attempt's response, which the SDK reads next: removed when the
// advice is ignored, rewritten in whole milliseconds when the SDK would
// read it otherwise (it ignores a value beyond int64 and wraps one beyond
// the largest Duration around). With the middleware the operation puts
// the original header back when it ends; without it the responses of the
// attempts that were retried (in the attempt results of the operation's
// metadata, retry.GetAttemptResults), and for a long-polling operation
// (whose refused retry the SDK still waits for) the last one, keep the
// rewritten value.
// RetryScheduled.Delay reports the wait the SDK will sleep (advice
// included) and Advised whether an advice set it.
//
// With the Retryer's middleware (LoadOptions, or AddMiddleware in a
// client's APIOptions), AttemptStart and AttemptEnd carry the exact
// attempt number, the Observer hears a CallEnd when the operation ends,
// the attempt runs with the context AttemptStart returned,
// Policy.AttemptTimeout bounds each attempt and Policy.MaxElapsed the
// operation (see AddMiddleware). Without it, the SDK does not tell a
// retryer which retry an attempt is nor when an operation ends:
// AttemptStart and AttemptEnd report Attempt 1 for a first attempt and 2
// for every retry (so their Retry method, and the metrics' attempt_kind,
// are right), no CallEnd is sent (so an Observer's per-call metrics —
// promretry's stormguard_calls_total, call duration and retries_active —
// are not kept), and a Policy that sets AttemptTimeout or MaxElapsed, or
// whose Budget (or NestedBudget, under NestedBudget) is a
// retry.BudgetTracker (or a group of them: see ErrMiddlewareMissing),
// fails every operation with ErrMiddlewareMissing
// rather than run without its bounds or leak the tracker's slots (see
// below). Either way RetryScheduled reports the exact number of the
// attempt that follows, and AttemptEnd gets the context AttemptStart
// returned (so that a tracer ends the attempt's span).
//
// The layer rule applies with or without the middleware: a call made
// while serving an inbound request whose caller retries
// (retry.CallerRetries of the operation's context) is not retried under
// NestedOneLayer (GetRetryToken returns ErrNestedRetry), and draws on the
// NestedBudget under NestedBudget. A retry granted by the Budget whose
// attempt never runs (the Limiter or the Breaker refused it, the caller
// gave up during the wait) is one the SDK never reports: with the
// middleware, a grant of a retry.BudgetTracker (budget.Concurrency) is
// given back (Refund) when its attempt is refused, when the next retry
// asks the Budget (a retryer wrapping the Retryer made the attempt's
// token itself) or when the operation ends; without it, it could not
// be, and would hold its slot of the tracker for good, which is why a
// BudgetTracker needs the middleware. A grant of any other Budget is not
// given back, as in the AWS SDKs.
//
// A Budget, NestedBudget, Breaker or Limiter of the Policy that is a
// group of members per key (retry.BudgetGroup, BreakerGroup,
// LimiterGroup: keyed.Budgets, keyed.Breakers, keyed.Limiters) is
// resolved as retry.Do resolves it (retry.ResolveGroups): with the
// middleware, once per operation, with the operation's context (the key
// keyed.WithKey put in it; without one, the group's default member), and
// that member serves every attempt and retry of the operation, so that
// one key's failures open that key's breaker alone and a
// budget.Concurrency member gets back the grants of its key's retries
// that never ran. Without the middleware, GetAttemptToken and
// GetRetryToken each resolve it with the context the SDK gives them.
// A group member function that panics fails the operation before any
// attempt, and the panic goes on.
//
// With the middleware, a retry whose wait (advice included) and then
// Policy.MinAttemptTime would not end before the caller's deadline is
// refused before the SDK sleeps (ErrDeadlineTooClose), as retry.Do does.
// The SDK hands GetRetryToken and RetryDelay the failed attempt's error
// and RetryDelay no context. With the middleware, RetryDelay still returns
// the wait GetRetryToken computed for that very attempt, whatever other
// operations fail at once, and the SDK sees its own error values: the
// attempt middleware hands the SDK the attempt's error as it is (so its
// metrics' exception.type, its logs, its attempt results and a wrapper of
// the Retryer get the SDK's types and chain), and the Retryer holds that
// value for the operation, with the attempt's number, from the attempt's
// end until the RetryDelay after that attempt (or the operation's end),
// through which RetryDelay finds the operation, under the SDK's clock
// skew marker too. The hold is the process's, not one Retryer's: RetryDelay
// finds it when the SDK's retryer is another Retryer than the one whose
// middleware is in the stack (config.WithRetryer(func() aws.Retryer {
// return awssdk.NewRetryer(p) }) makes one per client). That tells the
// operations apart by their error values, which the SDK's own errors keep
// distinct (each attempt makes new ones). The error is handed to the SDK
// wrapped in a value of the attempt's own instead, with the SDK's error's
// text and Unwrap (errors.As and errors.Is find the SDK's error in it; %T
// does not), when it is not a non-nil pointer, and when an operation (of
// any Retryer) holds a value at its address at that moment (that very
// value: one sentinel that a middleware or a fake transport returns to
// every operation; or another value there: zero-size values, a struct and
// its first field). Either way the Policy's callbacks get the SDK's
// error, and the operation's error and the attempt results in its
// metadata are the SDK's error chain. An
// operation without the middleware (a client of the same Retryer made
// without AddMiddleware) whose failure is (or wraps) the very value an
// operation with it holds, for the same attempt number, at the same
// moment, takes that operation's wait and context in RetryDelay (the
// other then computes its wait afresh, unchecked against MaxElapsed and
// the deadline, and its RetryScheduled gets context.Background()); at
// another attempt number it leaves the hold alone and computes its own
// wait. Without the middleware, RetryDelay computes the wait itself. Use
// one Retryer (and so one Policy, Budget and Breaker) for every client of
// a service: Provider and LoadOptions give config.WithRetryer the same
// Retryer for each client the aws.Config makes. A Retryer is safe for
// concurrent use. The Policy must not be modified while in use.
//
// With the middleware, an operation may end before its attempts do: a
// Finalize middleware between the Retryer's and the SDK's Retry
// middleware that returns (on a timeout of its own, say) while the retry
// loop goes on in a goroutine. Once the operation has ended its caller
// has its answer, so no attempt of it is admitted or sent and no retry
// granted (GetAttemptToken, GetRetryToken and the attempt middleware
// return ErrOperationEnded; a long-polling operation's SDK still waits
// RetryDelay's wait after the refusal, as after any); an attempt in
// flight when it ended is reported when it ends, its error handed to the
// SDK as it is, neither held nor wrapped (the SDK's metrics, logs and a
// wrapper of the Retryer see the SDK's own types); a retry granted before
// the end whose attempt had not started is given back to a BudgetTracker
// by the end, and an attempt admitted and not yet sent is reported as not
// made.
//
// An attempt is sent with a context that does not carry its operation:
// an SDK call made with it (from the HTTP client, a signer, a credentials
// provider, a deserializer, the Observer) by a client without the
// middleware is an operation of its own, without the middleware (so a
// Policy that needs it refuses the call with ErrMiddlewareMissing), and
// takes, counts and holds nothing of the outer operation's. So is a call
// made, while an attempt of the operation is admitted and not yet
// released, with a context that does carry it (from a Finalize
// middleware between the SDK's Retry middleware and the attempt
// middleware), and so is a second retry loop of one operation (a
// middleware of the user's that runs two at once) while an attempt of the
// other is live; a retry such a call (or a retryer wrapping the Retryer
// that skipped GetRetryToken) makes without a grant of the operation's
// BudgetTracker is recorded with it as a request. A client with the
// middleware makes an operation of its own either way.
//
// Every callback of the Policy (Classify, the Observer, Backoff, the
// Budget, Breaker and Limiter and their done functions) may panic: the
// panic goes on to the SDK's caller; a panic while an attempt's result is
// reported still reports it to every other part first (with the
// middleware, the Budget's record of a retry is made in the retry's
// attempt token release, with those reports; without it, in the retry
// token's release, which the SDK calls first, so a panic there keeps the
// attempt from being reported), and a panic in
// GetAttemptToken after the Limiter, the Breaker or a BudgetTracker's
// Start admitted the attempt reports the attempt to them as failed. With
// the middleware, so does a panic while the attempt is sent (the HTTP
// client, another middleware), whose token the SDK then never releases;
// without it, such an attempt is never reported: the Limiter keeps its
// permit and the Breaker its report, and the Observer hears no
// AttemptEnd (the SDK gives a retryer no hook to install the middleware
// itself, so use LoadOptions, or AddMiddleware in the client's
// APIOptions).
type Retryer struct {
	p        *retry.Policy
	clock    clock.Clock
	classify func(error) bool
	backoff  func(n int, err error) time.Duration
	probes   sync.Pool // *probe
	// maxAdvice is the longest x-amz-retry-after advice a retry may
	// follow (Policy.MaxRetryAfter; 0: retry.DefaultMaxRetryAfter);
	// negative: advice is ignored.
	maxAdvice time.Duration
	// needsMiddleware: the Policy asks for what only the middleware
	// gives (AttemptTimeout, MaxElapsed, a BudgetTracker's refunds).
	needsMiddleware bool
	// groups: the Policy's Budget, NestedBudget, Breaker or Limiter is a
	// group (retry.HasGroups), resolved per operation.
	groups bool
	// own are the Policy's parts as they are, for a Policy without
	// groups.
	own parts
}

// parts are the Budget, NestedBudget, Breaker and Limiter an operation
// uses: the Policy's, with each group (retry.BudgetGroup, BreakerGroup,
// LimiterGroup) replaced by its member for the operation's context
// (retry.ResolveGroups), so that every attempt and retry of the operation
// uses the same members.
type parts struct {
	from           *retry.Policy // the Policy they are of
	budget, nested retry.Budget
	breaker        retry.Breaker
	limiter        retry.Limiter
}

// resolve returns the parts of r's Policy for a call made with ctx: each
// group's member for ctx (keyed.WithKey's key, or the group's default
// member). A group's member function may panic; the panic goes on.
func (r *Retryer) resolve(ctx context.Context) *parts {
	p := retry.Policy{Budget: r.p.Budget, NestedBudget: r.p.NestedBudget, Breaker: r.p.Breaker, Limiter: r.p.Limiter}
	retry.ResolveGroups(ctx, &p)
	return &parts{from: r.p, budget: p.Budget, nested: p.NestedBudget, breaker: p.Breaker, limiter: p.Limiter}
}

// partsFor returns the parts a call made with ctx uses: the Policy's own
// when it has no group, else those op resolved when it began (nil op:
// without the middleware, or a call made inside an attempt of op; and an
// operation of another Policy's Retryer), or else those of ctx.
func (r *Retryer) partsFor(ctx context.Context, op *operation) *parts {
	if !r.groups {
		return &r.own
	}
	if op != nil && op.parts != nil && op.parts.from == r.p {
		return op.parts
	}
	return r.resolve(ctx)
}

// tracks reports whether the parts' Budget, or their NestedBudget under
// retry.NestedBudget, is a retry.BudgetTracker, whose grants only the
// middleware can give back.
func (p *parts) tracks() bool {
	_, tracks := p.budget.(retry.BudgetTracker)
	if _, nested := p.nested.(retry.BudgetTracker); nested && p.from.Nested == retry.NestedBudget {
		tracks = true
	}
	return tracks
}

var _ aws.RetryerV2 = (*Retryer)(nil)

// NewRetryer returns a Retryer running attempts under p. A nil p is
// awsretry.Rules{}.Policy(): the AWS SDKs' 2026 standard rules with a
// Ratio of its own. For a Budget or NestedBudget that is a
// retry.BudgetGroup, NewRetryer asks the group for its default member
// (BudgetFor with context.Background()): when that is a
// retry.BudgetTracker, the Retryer needs its middleware, as for a
// BudgetTracker (see ErrMiddlewareMissing).
func NewRetryer(p *retry.Policy) *Retryer {
	if p == nil {
		p = awsretry.Rules{}.Policy()
	}
	r := &Retryer{p: p, clock: clock.Or(p.Clock), classify: p.Classify, maxAdvice: p.MaxRetryAfter}
	if r.maxAdvice == 0 {
		r.maxAdvice = retry.DefaultMaxRetryAfter
	}
	r.own = parts{from: p, budget: p.Budget, nested: p.NestedBudget, breaker: p.Breaker, limiter: p.Limiter}
	tracks := r.own.tracks()
	if r.groups = retry.HasGroups(p); r.groups {
		// A group whose default member is a BudgetTracker (keyed.Budgets
		// of budget.Concurrency) tracks too.
		tracks = tracks || r.resolve(context.Background()).tracks()
	}
	r.needsMiddleware = p.AttemptTimeout > 0 || p.MaxElapsed > 0 || tracks
	if r.classify == nil {
		r.classify = awsretry.IsRetryable
	}
	switch b := p.Backoff.(type) {
	case retry.ErrorBackoff:
		r.backoff = func(n int, err error) time.Duration { return b.DelayAfter(n, 0, err) }
	case nil:
		rules := awsretry.Rules{Rand: p.Rand}
		r.backoff = func(n int, err error) time.Duration { return rules.DelayAfter(n, 0, err) }
	default:
		r.backoff = func(n int, _ error) time.Duration { return b.Delay(n, 0) }
	}
	r.probes.New = newProbe
	return r
}

// Provider returns a function that gives every caller the same Retryer
// under p, for config.WithRetryer (or aws.Config.Retryer):
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(awssdk.Provider(policy)))
//
// so that every client made from the aws.Config shares p's Budget,
// Breaker, Limiter and Observer. Provider alone does not put the
// Retryer's middleware in the clients' stacks (aws.Config.Retryer is
// asked for a retryer only; nothing in the SDK lets a retryer add
// middleware): use LoadOptions, which does both, or add
// Retryer.AddMiddleware to the config's APIOptions. See Retryer for what
// a Retryer without its middleware cannot do, and ErrMiddlewareMissing
// for the Policies it refuses.
func Provider(p *retry.Policy) func() aws.Retryer {
	r := NewRetryer(p)
	return func() aws.Retryer { return r }
}

// MaxAttempts returns the Policy's attempt limit, the first attempt
// included; 0 (which the SDK reads as no limit) for retry.Unlimited.
func (r *Retryer) MaxAttempts() int {
	return max(r.p.AttemptLimit(), 0)
}

// IsErrorRetryable reports whether the failure err is worth retrying: never
// an error marked retry.Permanent; always an attempt cut by
// Policy.AttemptTimeout (retry.ErrAttemptTimeout); else the Policy's
// Classify, or awsretry.IsRetryable when it has none. The SDK asks it
// after the attempt's tokens were released.
func (r *Retryer) IsErrorRetryable(err error) bool {
	if e, wrapped := err.(*attemptError); wrapped {
		err = e.err
	} else if wrapping.Load() != 0 {
		err = sdkError(err)
	}
	if err == nil || retry.IsPermanent(err) {
		return false
	}
	return errors.Is(err, retry.ErrAttemptTimeout) || r.classify(err)
}

// RetryDelay returns the wait before the retry that follows attempt
// (1 for the first attempt) after the failure err, by the Policy's
// Backoff, and tells the Observer (RetryScheduled). The SDK adds the
// x-amz-retry-after advice to it (see Retryer). With the Retryer's
// middleware the wait is the one GetRetryToken computed for this very
// attempt (and checked against MaxElapsed and the deadline), found
// through the attempt's error (see Retryer), and RetryScheduled gets the
// operation's context as its Finalize step got it (the caller's span; it
// does not carry the operation, so that an SDK call made with it is an
// operation of its own); without it, context.Background().
//
// RetryDelay also makes the x-amz-retry-after header of err's response
// say what the Retryer applies, for the SDK, which reads it next (see
// Retryer): removed when Policy.MaxRetryAfter is negative, rewritten in
// whole milliseconds when the SDK would read it otherwise than
// awsretry.RetryAfter does.
func (r *Retryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	op, kept, serr := failed(err, attempt)
	d, h, advice, advised := kept.delay, kept.header, kept.advice, kept.advised
	ctx := context.Background()
	if op != nil {
		ctx = op.ctx // the caller's, without the operation in it
	}
	if kept.n == 0 {
		d = max(r.backoff(attempt, serr), 0)
		h = responseHeader(serr)
		advice, advised = r.advice(h)
	}
	r.fitHeader(op, h, advice, advised)
	if o := r.p.Observer; o != nil {
		o.RetryScheduled(ctx, retry.RetryScheduled{
			Operation: r.p.Operation, Attempt: attempt + 1, Delay: sdkWait(d, advice, advised), Advised: advised, Err: serr,
		})
	}
	return d, nil
}

// advice returns the x-amz-retry-after advice of the response header h
// (responseHeader), read as awsretry.RetryAfter reads it (a huge value is
// 24 h); none when Policy.MaxRetryAfter is negative.
func (r *Retryer) advice(h http.Header) (time.Duration, bool) {
	if r.maxAdvice < 0 || h == nil {
		return 0, false
	}
	return awsretry.RetryAfter(headerReporter(h))
}

// sdkWait returns the wait the SDK sleeps after RetryDelay returned d for
// an error whose advice is advice (when advised): the advice clamped to
// [d, d + 5 s], or d.
func sdkWait(d, advice time.Duration, advised bool) time.Duration {
	if !advised {
		return d
	}
	most := d + awsretry.MaxAdviceExtra
	if most < d {
		most = math.MaxInt64
	}
	return min(max(advice, d), most)
}

// sdkAdvice reads an x-amz-retry-after value exactly as the SDK's Retry
// middleware does (aws/retry adjustForRetryAfterHeader): a decimal int64
// of milliseconds >= 0, multiplied without an overflow check.
func sdkAdvice(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// fitHeader rewrites the x-amz-retry-after header h of the failed
// attempt's response so that the SDK, which reads it after RetryDelay,
// applies the advice the Retryer read (want, when ok; Retryer.advice):
// none when Policy.MaxRetryAfter is negative (the header is removed), and
// a huge value (beyond int64, which the SDK ignores, or beyond the
// largest Duration, which it wraps around) as awsretry.RetryAfter clamps
// it. With the middleware (op not nil) the operation puts the original
// values back when it ends.
func (r *Retryer) fitHeader(op *operation, h http.Header, want time.Duration, ok bool) {
	if h == nil {
		return
	}
	vals, present := h[retryAfterKey]
	if !present {
		return
	}
	got, sdkOK := sdkAdvice(h.Get(retryAfterKey))
	if ok == sdkOK && want == got {
		return
	}
	if op != nil {
		// Under op.mu: an operation failing with the same error value as
		// op may reach op here (see failed).
		// Not once op ended (an attempt that ended after it, see hand):
		// nothing would put them back.
		f := op.failedOn() // made by the attempt middleware already
		f.mu.Lock()
		if !op.ended.Load() {
			if op.saved == nil {
				op.saved = new([]savedHeader)
			}
			*op.saved = append(*op.saved, savedHeader{h: h, vals: vals})
		}
		f.mu.Unlock()
	}
	if !ok {
		delete(h, retryAfterKey)
		return
	}
	h[retryAfterKey] = []string{strconv.FormatInt(int64(want/time.Millisecond), 10)}
}

// retryAfterKey is awsretry.RetryAfterHeader in canonical form.
var retryAfterKey = http.CanonicalHeaderKey(awsretry.RetryAfterHeader)

// savedHeader is a response header's x-amz-retry-after before fitHeader.
type savedHeader struct {
	h    http.Header
	vals []string
}

// responseErrorAs is errors.As for a *smithyhttp.ResponseError (apart,
// so that its target's allocation is made on this path alone).
func responseErrorAs(err error) *smithyhttp.ResponseError {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// headerReporter is a response's header as a retry.HeaderReporter, for
// awsretry.RetryAfter alone (a map: an interface holds it without
// allocating).
type headerReporter http.Header

func (headerReporter) Error() string { return "awssdk: response header" }

func (h headerReporter) ResponseHeader(name string) string { return http.Header(h).Get(name) }

// responseHeader returns the header of the SDK's HTTP response error in
// err's chain (the one the SDK's Retry middleware reads x-amz-retry-after
// from), or nil. It walks the usual chains without allocating and falls
// back on errors.As for an error that answers As itself.
func responseHeader(err error) http.Header {
	var re *smithyhttp.ResponseError
	for e := err; e != nil && re == nil; {
		switch x := e.(type) {
		case *smithyhttp.ResponseError:
			if x == nil {
				return nil
			}
			re = x
			continue
		case *awshttp.ResponseError:
			if x == nil || x.ResponseError == nil {
				return nil
			}
			re = x.ResponseError
			continue
		case interface{ As(any) bool }, interface{ Unwrap() []error }:
			if re = responseErrorAs(err); re == nil {
				return nil
			}
			continue
		}
		e = errors.Unwrap(e)
	}
	if re == nil || re.Response == nil || re.Response.Response == nil {
		return nil
	}
	return re.Response.Header
}

// GetRetryToken asks the Policy for one retry after the failure opErr:
// with the Retryer's middleware, the operation must not have ended (else
// ErrOperationEnded, before any other check, or after the Budget's grant,
// which a retry.BudgetTracker then gets back, when it ended meanwhile);
// the Breaker must be ready (else its error is returned); the layer rule
// must allow it (Policy.Nested; else ErrNestedRetry); an x-amz-retry-after
// advice must not exceed Policy.MaxRetryAfter (else ErrAdviceExceedsCap);
// with the Retryer's middleware, the wait before it and then
// Policy.MinAttemptTime must end before start+MaxElapsed and the caller's
// deadline (else ErrElapsed or ErrDeadlineTooClose); then the Budget (the
// NestedBudget for a call the layer rule governs with NestedBudget) must
// grant it (else ErrBudgetExhausted). The returned release records the
// retry's result with the Budget once it has run; with the middleware, a
// retry.BudgetTracker's grant whose release the SDK never calls is
// refunded when the operation ends.
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	op := operationOf(ctx)
	if op != nil {
		mine, ended, stale := op.retrying()
		if stale != nil {
			stale.Refund() // before the Budget is asked for this retry
		}
		if !mine {
			op = nil // a call made inside an attempt of op: one of its own
		} else if ended {
			return nil, ErrOperationEnded
		}
	}
	if op == nil && r.needsMiddleware {
		// No grant that nothing could give back (GetAttemptToken refuses
		// such a call's attempts: a retryer wrapping this one, or a
		// second retry loop of one operation, asked).
		return nil, ErrMiddlewareMissing
	}
	m := r.partsFor(ctx, op)
	if op == nil && r.groups && m.tracks() { // a member of ctx's key that tracks
		return nil, ErrMiddlewareMissing
	}
	opErr = op.sdk(opErr)
	if b := m.breaker; b != nil {
		if err := b.Ready(); err != nil {
			op.stop(retry.ReasonBreaker)
			return nil, err
		}
	}
	if r.p.NestedForbids(ctx) {
		op.stop(retry.ReasonNested)
		return nil, ErrNestedRetry
	}
	h := responseHeader(opErr)
	advice, advised := r.advice(h)
	if advised && advice > r.maxAdvice {
		// Coming back at the cap would be sooner than the server asked.
		op.stop(retry.ReasonAdvice)
		return nil, ErrAdviceExceedsCap
	}
	// With the middleware (which numbers the attempts), the wait is
	// computed here, to check it against MaxElapsed and the caller's
	// deadline, and kept in the operation for RetryDelay.
	var d time.Duration
	if op != nil {
		d = max(r.backoff(int(op.attempts.Load()), opErr), 0)
		if err := r.waitFits(ctx, op, sdkWait(d, advice, advised)); err != nil {
			return nil, err
		}
	}
	var record func(error)          // records the retry's result with the Budget
	var tracker retry.BudgetTracker // a BudgetTracker's, whose grant op holds
	switch b := r.budgetFor(ctx, m).(type) {
	case nil:
	case retry.PricedBudget:
		price, ok := b.WithdrawPriced(opErr)
		if !ok {
			op.stop(retry.ReasonBudget)
			return nil, ErrBudgetExhausted
		}
		record = func(err error) { b.RecordPriced(op.sdk(err), price) }
	default:
		if !b.Withdraw(opErr) {
			op.stop(retry.ReasonBudget)
			return nil, ErrBudgetExhausted
		}
		record = func(err error) { b.Record(true, op.sdk(err)) }
		if bt, tracks := b.(retry.BudgetTracker); tracks && op != nil {
			// The SDK drops the release when the retry does not run (a
			// refused attempt token, a done context, a cancelled
			// wait): the retry's attempt takes the grant from op, or
			// the operation's end refunds it.
			tracker = bt
		}
	}
	if op != nil {
		// Under op.mu: RetryDelay takes it in failed, which another
		// operation failing with the same error value may reach.
		k := keptWait{n: int(op.attempts.Load()), delay: d, header: h, advice: advice, advised: advised}
		f := op.failedOn()
		f.mu.Lock()
		f.kept = k
		f.mu.Unlock()
	}
	if record == nil {
		return nopRelease, nil
	}
	if op == nil {
		return func(err error) error { record(err); return nil }, nil
	}
	// With the middleware the retry's attempt, once admitted, takes the
	// record over (and a tracker's grant) and makes it with the
	// Limiter's, Breaker's and Observer's reports, so that a panicking
	// Budget does not keep them from theirs; the release records only a
	// retry whose attempt did not take it. A tracker's grant that no
	// attempt took stays with op, whose end refunds it: the retry was not
	// one the tracker counted (Start).
	held, displaced := op.hold(tracker, record)
	if displaced != nil { // a grant no attempt took (GetAttemptToken was not this Retryer's)
		defer displaced.Refund()
	}
	if !held { // the operation ended meanwhile
		if tracker != nil {
			tracker.Refund()
		}
		return nil, ErrOperationEnded
	}
	return func(err error) error {
		if f := op.takeRecord(); f != nil && tracker == nil {
			f(err)
		}
		return nil
	}, nil
}

// waitFits returns nil when the SDK's wait (advice included) and then
// MinAttemptTime end before start+MaxElapsed (else ErrElapsed) and before
// the caller's deadline (else ErrDeadlineTooClose), on the Policy's
// clock, as retry.Do decides.
func (r *Retryer) waitFits(ctx context.Context, op *operation, wait time.Duration) error {
	dl, hasDL := ctx.Deadline()
	if !hasDL && r.p.MaxElapsed <= 0 {
		return nil
	}
	span := wait + max(r.p.MinAttemptTime, 0)
	if span < wait {
		span = math.MaxInt64
	}
	need := r.clock.Now().Add(span)
	if r.p.MaxElapsed > 0 && !need.Before(op.start.Add(r.p.MaxElapsed)) {
		if !hasDL || op.start.Add(r.p.MaxElapsed).Before(dl) {
			op.stop(retry.ReasonDeadline)
			return ErrElapsed
		}
	}
	if hasDL && !need.Before(dl) {
		op.stop(retry.ReasonDeadline)
		return ErrDeadlineTooClose
	}
	return nil
}

// budgetFor returns the budget of a call made with ctx, of the parts m:
// the NestedBudget when the layer rule governs it with NestedBudget, else
// the Budget.
func (r *Retryer) budgetFor(ctx context.Context, m *parts) retry.Budget {
	if r.p.Nested == retry.NestedBudget && m.nested != nil && retry.CallerRetries(ctx) {
		return m.nested
	}
	return m.budget
}

// GetInitialToken returns a release that does nothing: the SDK calls
// GetAttemptToken of an aws.RetryerV2 instead.
func (r *Retryer) GetInitialToken() func(error) error { return nopRelease }

func nopRelease(error) error { return nil }

// GetAttemptToken admits one attempt: the Policy's Limiter, then its
// Breaker; a refusal returns the refusal's error, and the SDK fails the
// operation with it. With the Retryer's middleware, an operation that
// has ended gets ErrOperationEnded, before the Limiter or, when it ended
// meanwhile, once the attempt was admitted (which is then reported as
// not made). Without the middleware in the stack (or for an SDK call made
// inside an attempt: see Retryer), a Policy with AttemptTimeout or
// MaxElapsed, or with a retry.BudgetTracker budget (a group's member
// included: see ErrMiddlewareMissing), refuses every attempt with
// ErrMiddlewareMissing. The returned release reports the attempt's
// result to the Limiter, the Breaker, the Budget (for a first attempt)
// and the Observer.
func (r *Retryer) GetAttemptToken(ctx context.Context) (release func(error) error, err error) {
	op := operationOf(ctx)
	a := &attempt{r: r}
	if op != nil {
		var mine, ended bool
		if mine, ended = op.admit(a); !mine {
			op = nil // a call made inside an attempt of op: one of its own
		} else if ended {
			return nil, ErrOperationEnded
		}
	}
	if op == nil && r.needsMiddleware {
		return nil, ErrMiddlewareMissing
	}
	a.op = op
	ok := false
	defer func() {
		if !ok { // refused, or a callback panicked: release what was admitted
			why := err
			if why == nil {
				why = errAttemptNotMade
			}
			a.end(why)
		}
	}()
	m := r.partsFor(ctx, op)
	if op == nil && r.groups && m.tracks() { // a member of ctx's key that tracks
		return nil, ErrMiddlewareMissing
	}
	a.budget = r.budgetFor(ctx, m)
	if op != nil {
		a.n = int(op.attempts.Load()) + 1 // counted once the Limiter and Breaker admit it
		a.mask.Context = ctx
		ctx = &a.mask // the Limiter and the Observer see no operation in it
	} else if a.n = 1; !r.first(ctx) {
		a.n = 2
	}
	a.retry = a.n > 1
	if l := m.limiter; l != nil {
		if a.limiterDone, err = l.Acquire(ctx, a.retry); err != nil {
			a.limiterDone = nil
			op.stop(retry.ReasonThrottled)
			return nil, err
		}
	}
	if b := m.breaker; b != nil {
		if a.breakerDone, err = b.Allow(); err != nil {
			a.breakerDone = nil
			op.stop(retry.ReasonBreaker)
			return nil, err
		}
	}
	if op != nil {
		op.attempts.Store(int32(a.n))
	}
	a.asRetry = a.retry
	if bt, is := a.budget.(retry.BudgetTracker); is {
		// A retry the tracker granted nothing for (a second retry loop
		// of the operation, or a retryer wrapping this one that skipped
		// GetRetryToken, asked) starts and ends as a request: its Record
		// must not end another's grant. One with a grant ends it.
		a.asRetry = a.grant != nil
		bt.Start(a.asRetry)
		a.started = true
	}
	if o := r.p.Observer; o != nil {
		a.ctx = o.AttemptStart(ctx, retry.AttemptStart{Operation: r.p.Operation, Attempt: a.n})
	}
	if a.ctx == nil {
		a.ctx = ctx
	}
	a.start = r.clock.Now()
	ok = true
	if op != nil {
		if !op.publish() { // the operation ended meanwhile
			_ = a.release(errAttemptNotMade)
			return nil, ErrOperationEnded
		}
	}
	return a.release, nil
}

// errAttemptPanicked is the result reported for an attempt whose sending
// panicked (the SDK then drops its token's release; the attempt
// middleware reports it).
var errAttemptPanicked = errors.New("awssdk: attempt panicked")

// errAttemptNotMade is the result reported for an attempt that was
// admitted by some parts but never sent (a later part refused it or
// panicked).
var errAttemptNotMade = errors.New("awssdk: attempt not made")

// attempt is one admitted attempt, until its release.
type attempt struct {
	r       *Retryer
	op      *operation          // nil without the middleware
	budget  retry.Budget        // the budget the call draws on
	grant   retry.BudgetTracker // the retry grant it took from op, nil for none
	started bool                // the BudgetTracker's Start ran
	record  func(error)         // the retry's Budget record, taken from GetRetryToken
	// ctx is the context AttemptStart returned (else mask, or the
	// SDK's without the middleware), which the attempt is sent with.
	ctx context.Context
	// mask is the SDK's context without the operation (attemptContext),
	// part of the attempt so as to cost no allocation.
	mask                     attemptContext
	n                        int // the attempt's number, 1 for the first
	retry                    bool
	asRetry                  bool // the Budget records it as a retry (else as a first attempt)
	start                    time.Time
	limiterDone, breakerDone func(error)
	once                     sync.Once
}

// context returns the context the attempt is sent with.
func (a *attempt) context() context.Context { return a.ctx }

// release is the attempt token's release: the SDK calls it once, with
// the attempt's error (nil on success).
func (a *attempt) release(err error) error {
	a.once.Do(func() {
		if op := a.op; op != nil {
			op.leave(a)
		}
		a.report(a.op.sdk(err))
	})
	return nil
}

// end reports an attempt that never ran to the parts that admitted it.
// A BudgetTracker that counted it (Start) records it; for a retry that
// Record also ends the retry's grant, whose token the SDK then drops. A
// grant the attempt took without Start is given back.
func (a *attempt) end(err error) {
	a.once.Do(func() {
		if op := a.op; op != nil {
			op.leave(a)
		}
		if a.started {
			defer a.budget.Record(a.asRetry, err)
		} else if a.grant != nil {
			defer a.grant.Refund()
		}
		defer call(a.limiterDone, err)
		call(a.breakerDone, err)
	})
}

// report tells every part how the attempt ended. Each is told even when
// an earlier one panics; the first panic goes on afterwards.
func (a *attempt) report(err error) {
	r := a.r
	defer call(a.limiterDone, err)
	defer call(a.breakerDone, err)
	if b := a.budget; b != nil && !a.asRetry {
		defer b.Record(false, err)
	}
	if a.record != nil {
		defer a.record(err)
	}
	if o := r.p.Observer; o != nil {
		ctx := a.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		o.AttemptEnd(ctx, retry.AttemptEnd{
			Operation: r.p.Operation, Attempt: a.n, Outcome: outcome(err), Err: err,
			Duration: r.clock.Since(a.start),
		})
	}
}

func call(f func(error), err error) {
	if f != nil {
		f(err)
	}
}

// outcome classifies an attempt's result for the Observer.
func outcome(err error) retry.Outcome {
	switch {
	case err == nil:
		return retry.OutcomeSuccess
	case errors.Is(err, retry.ErrAttemptTimeout):
		return retry.OutcomeTimeout
	case retry.IsPermanent(err):
		return retry.OutcomePermanent
	case errors.Is(err, context.Canceled):
		return retry.OutcomeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return retry.OutcomeTimeout
	}
	return retry.OutcomeError
}

// first reports whether ctx is the context of an operation's first
// attempt. The SDK keeps the attempt number in the context under a key of
// its own; its standard retryer's documented GetAttemptToken answers with
// a release that adds NoRetryIncrement to its rate limiter on success for
// the first attempt only, which a probe (a standard retryer with a rate
// limiter that notes the deposit) reads.
func (r *Retryer) first(ctx context.Context) bool {
	pr := r.probes.Get().(*probe)
	defer r.probes.Put(pr)
	rel, err := pr.std.GetAttemptToken(ctx)
	if err != nil {
		return true
	}
	pr.lim.added = false
	_ = rel(nil)
	return pr.lim.added
}

// probe is a standard retryer whose rate limiter notes deposits.
type probe struct {
	std *sdkretry.Standard
	lim *probeLimiter
}

func newProbe() any {
	lim := &probeLimiter{}
	return &probe{
		std: sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
			o.RateLimiter = lim
			o.NoRetryIncrement = 1
		}),
		lim: lim,
	}
}

type probeLimiter struct{ added bool }

func (*probeLimiter) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}

func (l *probeLimiter) AddTokens(uint) error { l.added = true; return nil }
