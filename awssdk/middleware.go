package awssdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// ErrMiddlewareMissing is the error GetAttemptToken (and GetRetryToken)
// returns when the Policy sets AttemptTimeout or MaxElapsed, or its
// Budget (or the NestedBudget it uses under NestedBudget) is a
// retry.BudgetTracker such as budget.Concurrency (or a retry.BudgetGroup,
// keyed.Budgets, whose default member, or whose member for the call's
// context, is one), and the operation's
// stack lacks the Retryer's middleware (AddMiddleware), as for an SDK
// call made inside an attempt of another operation by a client without
// it (see Retryer): the operation fails at once rather than run
// without the bounds it asked for, or with a tracker whose grants of
// retries that never run (and whose attempts that panic while sent)
// could not be given back and would hold its slots for good.
var ErrMiddlewareMissing = errors.New("awssdk: Policy.AttemptTimeout, MaxElapsed and a retry.BudgetTracker budget need the Retryer's stack middleware: load the config with awssdk.LoadOptions, or add Retryer.AddMiddleware to the client's APIOptions")

// ErrElapsed is the error GetRetryToken returns when Policy.MaxElapsed
// cannot hold the wait before the next retry. It matches
// retry.ErrElapsed; the SDK joins it with the failed attempt's error.
var ErrElapsed = fmt.Errorf("awssdk: %w", retry.ErrElapsed)

// ErrNestedRetry is the error GetRetryToken returns when the layer rule
// (Policy.Nested) leaves retrying to the inbound caller. It matches
// retry.ErrNestedRetry.
var ErrNestedRetry = fmt.Errorf("awssdk: %w", retry.ErrNestedRetry)

// ErrOperationEnded is the error GetAttemptToken, GetRetryToken and the
// attempt middleware return for an operation that has ended while its
// retry loop goes on (a Finalize middleware between the Retryer's and the
// SDK's Retry middleware returned without waiting for it): no attempt is
// admitted or sent and no retry granted for a caller that has its answer.
// It is marked retry.Permanent, so that IsErrorRetryable reports false
// for it without asking the Policy's Classify.
var ErrOperationEnded = retry.Permanent(errors.New("awssdk: the operation has ended; no attempt or retry is made for it"))

// Middleware IDs, for a stack's Get or Remove.
const (
	OperationMiddlewareID = "stormguard.Operation"
	AttemptMiddlewareID   = "stormguard.Attempt"
	BodyMiddlewareID      = "stormguard.AttemptBody"
)

// LoadOptions returns the options that put a Retryer under p behind every
// client of the aws.Config: config.WithRetryer(Provider(p)) and its
// middleware (config.WithAPIOptions of Retryer.AddMiddleware):
//
//	cfg, err := config.LoadDefaultConfig(ctx, append(awssdk.LoadOptions(policy), config.WithRegion("eu-west-1"))...)
func LoadOptions(p *retry.Policy) []func(*config.LoadOptions) error {
	r := NewRetryer(p)
	return []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return r }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}),
	}
}

// AddMiddleware adds the Retryer's middleware to an operation's stack
// (give it to a client's APIOptions, or use LoadOptions). Around the
// SDK's Retry middleware it
//
//   - numbers the attempts, so that the Observer's AttemptStart and
//     AttemptEnd carry the exact attempt (1, 2, 3, …);
//   - sends the Observer's CallEnd when the operation ends, with its
//     attempts (those the Limiter and the Breaker admitted), duration, error and reason (ReasonSuccess, or why it
//     stopped: attempts, budget, breaker, throttled, deadline, nested,
//     context, overloaded, permanent, panic);
//   - bounds the operation by Policy.MaxElapsed and the caller's
//     deadline: no retry whose wait, and then MinAttemptTime, would end
//     past start+MaxElapsed or the deadline (GetRetryToken returns
//     ErrElapsed or ErrDeadlineTooClose, before the SDK sleeps);
//   - bounds each attempt by Policy.AttemptTimeout, until its response is
//     deserialized: an attempt cut by it fails with an error matching
//     retry.ErrAttemptTimeout, which is retried unless marked Permanent.
//     An attempt whose AttemptTimeout fires after its response arrived,
//     with the body left to the caller still unread (a streamed response,
//     S3 GetObject), is cut too: its body is closed and it fails so.
//     Otherwise a streamed body is then read under the caller's context
//     alone, and closing it releases the attempt;
//   - runs the attempt with the context the Observer's AttemptStart
//     returned (so that an OpenTelemetry span is the HTTP request's
//     parent), without the operation in it (an SDK call made with it by
//     a client without the middleware is an operation of its own: see
//     Retryer);
//   - resolves the Policy's groups (keyed.Budgets, keyed.Breakers,
//     keyed.Limiters) once for the operation, with its context (see
//     Retryer);
//   - makes no attempt and no retry for an operation that has ended
//     while its retry loop goes on (ErrOperationEnded; see Retryer).
//
// A stack without the SDK's Retry middleware is left as it is.
func (r *Retryer) AddMiddleware(stack *middleware.Stack) error {
	if _, ok := stack.Finalize.Get("Retry"); !ok {
		return nil
	}
	if err := stack.Finalize.Insert(operationMiddleware{r}, "Retry", middleware.Before); err != nil {
		return err
	}
	if err := stack.Finalize.Insert(attemptMiddleware{r}, "Retry", middleware.After); err != nil {
		return err
	}
	return stack.Deserialize.Add(bodyMiddleware{}, middleware.After)
}

// operation is the state of one operation, from its Finalize step to its
// end. The SDK's Retry middleware runs its attempts one after another,
// but an attempt may end after its operation (a Finalize middleware
// between the operation's and the SDK's Retry middleware that returns
// and leaves the retry loop running in a goroutine), and an SDK call made
// inside an attempt may find the operation in its context: every field
// but start, ctx and parts (set before the operation is reachable) is
// atomic or under mu, and what another operation failing with the same
// error value may reach (held, kept and saved) is under the failure's
// locks (see hand).
type operation struct {
	start time.Time // set only with an Observer or MaxElapsed; read-only after
	ctx   context.Context
	// parts are the Policy's parts with its groups resolved for ctx (nil
	// when the Policy has no group); read-only.
	parts *parts
	// attempts counts the attempts the Limiter and the Breaker admitted.
	attempts atomic.Int32
	// stopped is 1 + why the Retryer stopped the operation (a
	// retry.Reason), 0 while it has not.
	stopped atomic.Uint32
	// saved are the x-amz-retry-after values RetryDelay rewrote, put
	// back when the operation ends (nil until one is). Under fail's mu.
	saved *[]savedHeader
	// fail is what a failed attempt needs, made with the first one (so
	// that an operation whose first attempt succeeds does not carry it).
	fail atomic.Pointer[failure]
	// ended: the operation ended (end). Set under mu. An attempt ending
	// later is neither held nor wrapped (see hand), no retry is granted
	// and no attempt admitted or sent after it (ErrOperationEnded).
	ended atomic.Bool
	// wrapped: an attempt of the operation failed with an error the
	// Retryer could not hold, handed to the SDK as an attemptError.
	wrapped atomic.Bool

	// mu guards what the retry loop and the operation's end both take,
	// and orders the admission of an attempt (live) with them.
	mu sync.Mutex
	// pendingRetry is the BudgetTracker of a retry GetRetryToken granted
	// that no attempt has taken yet; the operation's end refunds it.
	pendingRetry retry.BudgetTracker
	// retryRecord records the granted retry's result with the Budget,
	// until the retry's attempt takes it (or its token's release runs).
	retryRecord func(error)
	// live is the attempt GetAttemptToken admitted and whose token has
	// not been released (set under mu): while it is set, a call of
	// GetAttemptToken or GetRetryToken with a context carrying the
	// operation is not the operation's (an SDK call made inside the
	// attempt by a client without the middleware), which is then an
	// operation of its own.
	live atomic.Pointer[attempt]
	// pending: pendingRetry is set (written under mu), so that retrying
	// takes mu only for a grant no attempt took.
	pending atomic.Bool
	// unsent: the attempt middleware has not taken live yet; the
	// operation's end releases it (the SDK drops the token of an
	// attempt it does not send: a stream it could not rewind). Whoever
	// swaps it from true takes live.
	unsent atomic.Bool
}

// failure is the state of an operation whose attempt failed.
type failure struct {
	// held is the error value of the operation's failed attempt as the
	// SDK got it, which holds (see hand) maps to the operation, and heldN
	// the number of that attempt (nil and 0 when it holds none); counted:
	// the operation adds 1 to wrapping. Under holds.mu.
	held    error
	heldN   int
	counted bool
	// listed: holds or wrapping may have something of the operation (see
	// hand and letGo).
	listed atomic.Bool
	// mu guards kept, what GetRetryToken computed for RetryDelay, and
	// the operation's saved: another operation failing with the same
	// error value may reach this one in RetryDelay (see failed).
	mu   sync.Mutex
	kept keptWait
}

// failedOn returns op's failure state, made on the first call, by op's
// attempt goroutine (hand, GetRetryToken, fitHeader) before op is
// reachable from another through it; one another reaches (failed) has it.
func (op *operation) failedOn() *failure {
	if f := op.fail.Load(); f != nil {
		return f
	}
	return op.newFailure()
}

// newFailure makes op's failure state (failedOn's slow path, apart so
// that failedOn inlines).
//
//go:noinline
func (op *operation) newFailure() *failure {
	f := &failure{}
	op.fail.Store(f)
	return f
}

// holds maps the error value of an operation's failed attempt, handed to
// the SDK as it is, to that operation, from the attempt's end until
// RetryDelay or the operation's end (see hand). It is one for the
// process, not one per Retryer: the SDK's retryer (aws.Config.Retryer)
// and the Retryer whose middleware is in the stack may be two values
// (config.WithRetryer(func() aws.Retryer { return NewRetryer(p) }) makes
// one per client), and RetryDelay of the one must find what the other
// holds.
var holds struct {
	mu sync.Mutex
	m  map[uintptr]*operation // by the value's address; with failure.held, under mu
}

// wrapping counts the operations that handed the SDK an attemptError and
// have not ended, of every Retryer (one for the process, as holds): while
// it is 0, no error the SDK hands a Retryer holds one under a wrapper.
var wrapping atomic.Int64

// keptWait is what GetRetryToken computed for the RetryDelay after attempt
// n (0: none): the wait, and the failed response's header and its advice.
type keptWait struct {
	n       int
	delay   time.Duration
	header  http.Header
	advice  time.Duration
	advised bool
}

// end, when the operation ends, reports an admitted attempt whose token
// the SDK dropped unsent (a stream it could not rewind) as not made, and
// gives back a retry granted and never taken by an attempt.
func (op *operation) end() {
	op.mu.Lock()
	op.ended.Store(true) // before fail is read: see hand
	bt := op.pendingRetry
	op.pendingRetry = nil
	op.pending.Store(false)
	var a *attempt
	if op.unsent.Swap(false) { // after ended is set: see publish
		a = op.live.Load()
	}
	op.mu.Unlock()
	if f := op.fail.Load(); f != nil {
		op.letGo(f)
	} // else nothing was saved: fitHeader saves after failedOn only
	if bt != nil {
		defer bt.Refund()
	}
	if a != nil {
		_ = a.release(errAttemptNotMade)
	}
}

// admit reserves op for a, an attempt of its own retry loop, which takes
// the retry grant op holds and its record (a.grant, a.record). mine is
// false when an attempt of op is live (the caller is an SDK call made
// inside it: it is not op's), ended true when op has ended (and then a
// is not op's either).
func (op *operation) admit(a *attempt) (mine, ended bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	switch {
	case op.live.Load() != nil:
		return false, op.ended.Load()
	case op.ended.Load():
		return true, true
	}
	// A flag left by an earlier attempt that no attempt middleware took
	// (one failed between the SDK's Retry middleware and the attempt
	// middleware) is not a's: end must not release a while it is being
	// admitted (publish sets it once a is).
	op.unsent.Store(false)
	op.live.Store(a)
	a.grant, op.pendingRetry = op.pendingRetry, nil
	op.pending.Store(false)
	a.record, op.retryRecord = op.retryRecord, nil
	return true, false
}

// publish hands op's admitted attempt a to the attempt middleware, or
// reports false when op has ended meanwhile (the caller releases a,
// which end may release too).
func (op *operation) publish() bool {
	op.unsent.Store(true) // before ended is read, as end sets ended before it swaps unsent
	if op.ended.Load() {
		op.unsent.Swap(false)
		return false
	}
	return true
}

// sending returns op's attempt about to be sent, taking it (nil: none),
// and whether op has ended.
func (op *operation) sending() (a *attempt, ended bool) {
	if op.unsent.Swap(false) {
		a = op.live.Load()
	}
	return a, op.ended.Load()
}

// retrying reports whether op's retry loop may ask for a retry now: no
// attempt of op is live (else ctx is an SDK call's made inside it, mine
// is false), and whether op has ended. It takes stale, the tracker of an
// earlier grant no attempt took (GetAttemptToken was not a Retryer's),
// which the caller gives back.
func (op *operation) retrying() (mine, ended bool, stale retry.BudgetTracker) {
	if !op.pending.Load() { // nothing to take: the atomics alone answer
		return op.live.Load() == nil, op.ended.Load(), nil
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	switch {
	case op.live.Load() != nil:
		return false, op.ended.Load(), nil
	case op.ended.Load():
		return true, true, nil
	}
	stale, op.pendingRetry = op.pendingRetry, nil
	op.pending.Store(false)
	return true, false, stale
}

// hold keeps a granted retry's record, and the BudgetTracker bt whose
// grant it is (nil: none), for the next attempt of op, or reports false
// when op has ended (the caller gives the grant back). displaced is the
// tracker of an earlier grant no attempt took, which the caller gives
// back.
func (op *operation) hold(bt retry.BudgetTracker, record func(error)) (held bool, displaced retry.BudgetTracker) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.ended.Load() {
		return false, nil
	}
	displaced = op.pendingRetry
	op.pendingRetry, op.retryRecord = bt, record
	op.pending.Store(bt != nil)
	return true, displaced
}

// takeRecord takes the granted retry's record no attempt took (nil:
// none).
func (op *operation) takeRecord() func(error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	f := op.retryRecord
	op.retryRecord = nil
	return f
}

// leave ends attempt a's hold on op (live), and its unsent flag when no
// attempt middleware took it (the SDK released the token of an attempt
// it did not send): a is live until then, so no other attempt is
// admitted and the flag is a's.
func (op *operation) leave(a *attempt) {
	if op.unsent.Load() && op.live.Load() == a {
		op.unsent.Store(false)
	}
	op.live.CompareAndSwap(a, nil)
}

// restore puts back the x-amz-retry-after values RetryDelay rewrote.
func (op *operation) restore() {
	if op.saved != nil {
		for i := len(*op.saved) - 1; i >= 0; i-- { // the first saved is the original
			s := (*op.saved)[i]
			s.h[retryAfterKey] = s.vals
		}
		op.saved = nil
	}
}

func (op *operation) stop(r retry.Reason) {
	if op != nil {
		op.stopped.Store(uint32(r) + 1)
	}
}

type operationKey struct{}

// operationOf returns ctx's operation, or nil without the middleware (or
// for an attempt's context: see attemptContext).
func operationOf(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	return op
}

// attemptContext is the context an attempt is sent with: its parent's,
// without the operation, so that an SDK call made with it (from the HTTP
// client, a signer, a credentials provider, a deserializer, an Observer)
// by a client without the middleware is an operation of its own, and
// takes, counts and holds nothing of the attempt's; and without the
// attempt control of an attempt it is made inside (attemptCtlKey), so
// that the body middleware of such a call by a client with the
// middleware and no AttemptTimeout (whose send adds no control of its
// own) does not hand the outer attempt's end to the nested response's
// body.
type attemptContext struct{ context.Context }

func (c *attemptContext) Value(key any) any {
	switch key.(type) {
	case operationKey, attemptCtlKey:
		return nil
	}
	return c.Context.Value(key)
}

// operationMiddleware runs outside the SDK's Retry middleware.
type operationMiddleware struct{ r *Retryer }

func (operationMiddleware) ID() string { return OperationMiddlewareID }

func (m operationMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	out middleware.FinalizeOutput, md middleware.Metadata, err error,
) {
	r := m.r
	op := &operation{ctx: ctx}
	obs := r.p.Observer
	if obs == nil {
		defer op.end()
	}
	if obs != nil || r.p.MaxElapsed > 0 { // the only readers of op.start
		op.start = r.clock.Now()
	}
	if obs == nil {
		if r.groups {
			op.parts = r.resolve(ctx)
		}
		out, md, err = next.HandleFinalize(context.WithValue(ctx, operationKey{}, op), in)
		if op.wrapped.Load() {
			md, err = stripAll(md, err)
		}
		return out, md, err
	}
	done := false
	defer func() {
		reason := retry.ReasonPanic
		if done {
			reason = r.reason(op, err)
		}
		obs.CallEnd(ctx, retry.CallEnd{
			Operation: r.p.Operation, Attempts: int(op.attempts.Load()), Reason: reason, Err: err,
			Duration: r.clock.Since(op.start),
		})
	}()
	// Before CallEnd: the Observer sees the response headers restored and
	// every grant and attempt of the operation given back.
	defer op.end()
	if r.groups {
		op.parts = r.resolve(ctx)
	}
	out, md, err = next.HandleFinalize(context.WithValue(ctx, operationKey{}, op), in)
	if op.wrapped.Load() {
		md, err = stripAll(md, err)
	}
	done = true
	return out, md, err
}

// reason says why the operation op ended with err.
func (r *Retryer) reason(op *operation, err error) retry.Reason {
	var maxErr *sdkretry.MaxAttemptsError
	switch {
	case err == nil:
		return retry.ReasonSuccess
	case op.stopped.Load() != 0:
		return retry.Reason(op.stopped.Load() - 1)
	case errors.As(err, &maxErr):
		return retry.ReasonAttempts
	case op.ctx.Err() != nil:
		return retry.ReasonContext
	case retry.IsOverloaded(err):
		return retry.ReasonOverloaded
	}
	return retry.ReasonPermanent
}

// attemptMiddleware runs inside the SDK's Retry middleware, once per
// attempt.
type attemptMiddleware struct{ r *Retryer }

func (attemptMiddleware) ID() string { return AttemptMiddlewareID }

// attemptCtl ends an attempt's context: at once when the attempt failed,
// else when its response body is closed.
type attemptCtl struct {
	cancel context.CancelCauseFunc
	owned  bool         // the body middleware handed the end to the body
	body   *attemptBody // the body it handed it to
}

type attemptCtlKey struct{}

func (m attemptMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	out middleware.FinalizeOutput, md middleware.Metadata, err error,
) {
	op := operationOf(ctx)
	if op == nil {
		return m.send(m.unmasked(ctx), in, next)
	}
	a, ended := op.sending()
	switch {
	case a == nil && ended:
		// Not sent: the operation has ended (its end released the
		// attempt, as the SDK may drop the token of an attempt it does
		// not send).
		return out, md, ErrOperationEnded
	case a == nil: // an attempt the operation did not admit (the SDK's retryer is not a Retryer)
		return m.send(m.unmasked(ctx), in, next)
	}
	defer func() {
		if err != nil { // held for RetryDelay, or an error value of this attempt's own
			err = hand(op, err)
		}
	}()
	// A panic while the attempt is sent makes the SDK drop its token's
	// release: report the attempt as failed then (the panic goes on).
	sent := false
	defer func() {
		if !sent {
			_ = a.release(errAttemptPanicked)
		}
	}()
	out, md, err = m.send(a.context(), in, next)
	sent = true
	return out, md, err
}

// unmasked returns the context of an attempt sent without its own
// attemptContext (one the operation did not admit): ctx, without the
// attempt control of an outer attempt the call is made inside when
// Policy.AttemptTimeout adds none of its own (see attemptContext).
func (m attemptMiddleware) unmasked(ctx context.Context) context.Context {
	if m.r.p.AttemptTimeout <= 0 && ctx.Value(attemptCtlKey{}) != nil {
		return context.WithValue(ctx, attemptCtlKey{}, (*attemptCtl)(nil))
	}
	return ctx
}

// send sends the attempt under Policy.AttemptTimeout.
func (m attemptMiddleware) send(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	out middleware.FinalizeOutput, md middleware.Metadata, err error,
) {
	d := m.r.p.AttemptTimeout
	if d <= 0 {
		return next.HandleFinalize(ctx, in)
	}
	actx, cancel := context.WithCancelCause(ctx)
	ctl := &attemptCtl{cancel: cancel}
	ended := false
	var timer clock.Timer
	defer func() { // before the timer is made: a panicking clock ends actx too
		if timer != nil {
			timer.Stop()
		}
		if !ended || err != nil || !ctl.owned {
			cancel(nil)
		}
	}()
	timer = m.r.clock.AfterFunc(d, func() { cancel(retry.ErrAttemptTimeout) })
	out, md, err = next.HandleFinalize(context.WithValue(actx, attemptCtlKey{}, ctl), in)
	ended = true
	fired := !timer.Stop() // fired, or firing now
	switch {
	case err != nil:
		if ctx.Err() == nil && errors.Is(context.Cause(actx), retry.ErrAttemptTimeout) {
			err = &attemptTimeoutError{err: err}
		}
	case fired && ctx.Err() == nil && ctl.body != nil && !ctl.body.closed.Load():
		// The timer fired after the response arrived: its body, left
		// to the caller, would fail on read under the ended context.
		_ = ctl.body.Close()
		err = &attemptTimeoutError{err: errLateResponse}
	}
	return out, md, err
}

// errLateResponse is the error of an attempt whose AttemptTimeout fired
// after its response arrived, with its body not yet read.
var errLateResponse = errors.New("the response came as the attempt timed out, its body unread")

// attemptTimeoutError is an attempt's error when AttemptTimeout cut it:
// it matches retry.ErrAttemptTimeout and wraps what the SDK returned.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string {
	return "awssdk: " + retry.ErrAttemptTimeout.Error() + ": " + e.err.Error()
}
func (e *attemptTimeoutError) Unwrap() error        { return e.err }
func (e *attemptTimeoutError) Is(target error) bool { return target == retry.ErrAttemptTimeout }

// bodyMiddleware, innermost in the Deserialize step, hands the end of an
// attempt's context to its response body.
type bodyMiddleware struct{}

func (bodyMiddleware) ID() string { return BodyMiddlewareID }

func (bodyMiddleware) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	out middleware.DeserializeOutput, md middleware.Metadata, err error,
) {
	out, md, err = next.HandleDeserialize(ctx, in)
	ctl, _ := ctx.Value(attemptCtlKey{}).(*attemptCtl)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && ctl != nil && resp.Response != nil && resp.Body != nil {
		ctl.body = &attemptBody{ReadCloser: resp.Body, cancel: ctl.cancel}
		resp.Body, ctl.owned = ctl.body, true
	}
	return out, md, err
}

// attemptBody ends its attempt's context when it is closed.
type attemptBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
	once   sync.Once
	closed atomic.Bool
}

func (b *attemptBody) Close() error {
	b.closed.Store(true)
	defer b.once.Do(func() { b.cancel(nil) })
	return b.ReadCloser.Close()
}

// hand returns the error the SDK gets for op's attempt that failed with
// err. That is err itself, which op then holds (holds), with the
// attempt's number, until RetryDelay finds op through it for that
// attempt (or op ends), so that RetryDelay, which the SDK gives the error
// and no context, returns the wait GetRetryToken computed for this very
// attempt. The SDK's errors are new values for every attempt. An error
// that is not a non-nil pointer, or at whose address an operation (of
// any Retryer) holds a value at that moment, is handed over as an
// attemptError of this attempt's own instead: that very value (a
// sentinel that a middleware or a fake transport returns to many
// operations) cannot tell the operations apart, and another value at
// that address (zero-size values, a struct and its first field) is not
// held either. The error of an attempt that ends after its operation (a
// Finalize middleware between the operation middleware and the SDK's
// Retry middleware that returned early, leaving the retry loop running)
// is handed over as it is, neither held nor wrapped nor counted in
// wrapping: no retry follows it (GetRetryToken refuses one with
// ErrOperationEnded), and nothing would let go of a hold.
func hand(op *operation, err error) error {
	key := address(err)
	f := op.failedOn()
	holds.mu.Lock()
	if f.held != nil {
		unhold(op, f)
	}
	// Listed before ended is read, as end sets ended before it reads
	// listed: one of the two sees the other.
	f.listed.Store(true)
	switch {
	case op.ended.Load():
		// Neither held nor wrapped: no retry follows (GetRetryToken
		// refuses it), nothing would let go of a hold, and the SDK sees
		// its own error.
		f.listed.Store(f.counted) // letGo has uncounted it, or will
		holds.mu.Unlock()
		return err
	case key != 0 && holds.m[key] == nil:
		if holds.m == nil {
			holds.m = make(map[uintptr]*operation)
		}
		holds.m[key], f.held, f.heldN = op, err, int(op.attempts.Load())
		holds.mu.Unlock()
		return err
	case !f.counted:
		f.counted = true
		wrapping.Add(1)
	}
	holds.mu.Unlock()
	op.wrapped.Store(true)
	return &attemptError{err: err, op: op}
}

// address returns the address err points to, its key in holds, or 0 when
// err is not a non-nil pointer. While an operation holds err
// (failure.held), that keeps the value alive, so that no other takes its
// address; two values at one address (a struct and its first field, or
// zero-size values) are told apart by failure.held, or else the later one
// is not held (see hand).
func address(err error) uintptr {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer {
		return 0
	}
	return v.Pointer()
}

// unhold lets go of the error value op holds (f.held). Under holds.mu.
func unhold(op *operation, f *failure) {
	if key := address(f.held); holds.m[key] == op {
		delete(holds.m, key)
	}
	f.held, f.heldN = nil, 0
}

// letGo, when op ends (ended set), lets go of the error value op holds,
// of its count in wrapping and of what it kept for RetryDelay, and puts
// back the headers RetryDelay rewrote.
func (op *operation) letGo(f *failure) {
	if f.listed.Load() { // else holds and wrapping have nothing of op
		holds.mu.Lock()
		if f.held != nil {
			unhold(op, f)
		}
		if f.counted {
			f.counted = false
			wrapping.Add(-1)
		}
		f.listed.Store(false)
		holds.mu.Unlock()
	}
	f.mu.Lock()
	f.kept = keptWait{}
	op.restore() // under f.mu, as fitHeader saves
	f.mu.Unlock()
}

// failed returns the operation whose attempt failed with err, the error
// the SDK hands RetryDelay (the one the attempt middleware handed it, or
// the SDK's clock skew marker around it), and what GetRetryToken kept for
// the RetryDelay after attempt, taking it; a nil operation for an error
// of no operation (a stack without the middleware). An operation that
// holds that very value for that attempt lets go of it; one that holds it
// for another attempt keeps it, and is not returned (the failure is
// another operation's, without the middleware). serr is the SDK's error.
func failed(err error, attempt int) (op *operation, kept keptWait, serr error) {
	serr = err
	for e := err; e != nil && op == nil; e = errors.Unwrap(e) {
		if ae, wrapped := e.(*attemptError); wrapped {
			op, serr = ae.op, sdkError(err)
			break
		}
		key := address(e)
		if key == 0 {
			continue
		}
		holds.mu.Lock()
		if op = holds.m[key]; op != nil {
			// The very value (not another at its address), held for
			// this attempt.
			if f := op.fail.Load(); f.held == e && f.heldN == attempt {
				unhold(op, f)
				f.listed.Store(f.counted)
			} else {
				op = nil
			}
		}
		holds.mu.Unlock()
	}
	if op != nil {
		f := op.fail.Load() // made by hand
		f.mu.Lock()
		if f.kept.n != 0 && f.kept.n == attempt {
			kept, f.kept = f.kept, keptWait{}
		}
		f.mu.Unlock()
	}
	return op, kept, serr
}

// attemptError is a failed attempt's error as the attempt middleware hands
// it to the SDK's Retry middleware when the Retryer cannot hold the SDK's
// error value for it (see hand): the SDK's error (Unwrap, the
// same Error text) made a value of this attempt's own, which carries its
// operation. The Retryer's callbacks see the SDK's error; the operation
// middleware takes attemptError out of the operation's error (strip) and
// of its attempt results.
type attemptError struct {
	err error
	op  *operation
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// sdk returns err without an attemptError of op (nil: an operation
// without the middleware, which makes none).
func (op *operation) sdk(err error) error {
	if op == nil || !op.wrapped.Load() {
		return err
	}
	return sdkError(err)
}

// sdkError returns err without the attempt middleware's attemptError on
// top.
func sdkError(err error) error {
	if e, ok := err.(*attemptError); ok {
		return e.err
	}
	if attemptErrorOf(err) != nil {
		// Under an SDK wrapper (the clock skew marker): a copy of the
		// chain without the attemptError, leaving err as it is for
		// RetryDelay to find the operation in.
		s, _ := stripped(err, true)
		return s
	}
	return err
}

// attemptErrorOf returns the attemptError in err's chain, or nil.
func attemptErrorOf(err error) *attemptError {
	if e, ok := err.(*attemptError); ok {
		return e
	}
	var e *attemptError
	if err != nil && errors.As(err, &e) {
		return e
	}
	return nil
}

// strip returns err with each attemptError in its chain replaced by the
// error it carries, so that the caller gets the SDK's error chain: the
// SDK's wrappers (*retry.MaxAttemptsError, errors.Join with a
// GetRetryToken refusal, the clock skew marker) are the same values with
// their field set to the SDK's error, errors.Join's is joined again. An
// attemptError under a wrapper strip cannot rebuild (a multi-error other
// than errors.Join's, or a wrapper without an exported error field) stays,
// with the SDK's error's text and Unwrap.
func strip(err error) error {
	s, _ := stripped(err, false)
	return s
}

// stripped is strip, and whether it changed anything. With copying, a
// wrapper that holds an attemptError is copied, never changed in place.
func stripped(err error, copying bool) (error, bool) {
	switch e := err.(type) {
	case nil:
		return nil, false
	case *attemptError:
		return e.err, true
	case *sdkretry.MaxAttemptsError:
		inner, changed := stripped(e.Err, copying)
		if changed {
			if copying {
				c := *e
				e = &c
			}
			e.Err = inner
		}
		return e, changed
	case interface{ Unwrap() []error }:
		if reflect.TypeOf(err) != joinType {
			return err, false
		}
		errs := e.Unwrap()
		out := make([]error, len(errs))
		changed := false
		for i, x := range errs {
			var c bool
			out[i], c = stripped(x, copying)
			changed = changed || c
		}
		if !changed {
			return err, false
		}
		return errors.Join(out...), true
	}
	inner := errors.Unwrap(err)
	s, changed := stripped(inner, copying)
	if !changed {
		return err, false
	}
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return err, false
	}
	for i, sv := 0, v.Elem(); i < sv.NumField(); i++ {
		f := sv.Field(i)
		if f.Type() == errorType && f.CanSet() && same(f.Interface(), inner) {
			if copying {
				c := reflect.New(sv.Type())
				c.Elem().Set(sv)
				c.Elem().Field(i).Set(reflect.ValueOf(&s).Elem())
				cp, ok := c.Interface().(error)
				if !ok {
					return err, false
				}
				return cp, true
			}
			f.Set(reflect.ValueOf(&s).Elem())
			return err, true
		}
	}
	return err, false
}

// same reports whether a and b are the same value; false when == panics
// (a comparable type holding an uncomparable value) or cannot be used.
func same(a, b any) (eq bool) {
	if t := reflect.TypeOf(a); t == nil || t != reflect.TypeOf(b) || !t.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

var (
	joinType  = reflect.TypeOf(errors.Join(errors.New("")))
	errorType = reflect.TypeFor[error]()
)

// stripAll strips the operation's error err and the attempt errors of
// the SDK's attempt results in md (retry.GetAttemptResults), in place. The
// last attempt's result holds err itself: it gets err's stripped value,
// not a second copy of it.
func stripAll(md middleware.Metadata, err error) (middleware.Metadata, error) {
	s := strip(err)
	if res, ok := sdkretry.GetAttemptResults(md); ok {
		for i := range res.Results {
			if e := res.Results[i].Err; e != nil && same(e, err) {
				res.Results[i].Err = s
			} else {
				res.Results[i].Err = strip(e)
			}
		}
	}
	return md, s
}
