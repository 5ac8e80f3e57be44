package grpcretry

import (
	"context"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// UnaryClientInterceptor returns an interceptor that retries unary calls
// under the Policy src gives (nil, or a nil Policy: the zero Policy, so
// retry.DefaultMaxAttempts attempts), classifying failures by status code and honouring server pushback. Only
// methods declared idempotent (see Option) are retried once the request
// may have reached the server, and a call whose server sent response
// headers is committed: its failure is final (gRFC A6). grpc.OnFinish
// callbacks among the call options run once per call, with its error. See
// the package documentation for the rules.
//
// src is a *retry.Policy, which never changes, or a source whose Policy
// may: a *config.Handle follows its policy file. The interceptor asks src
// once per call, when the call starts, so a reload reaches every setting
// of the next call without a new connection, and a call in flight keeps
// the Policy it started with.
//
// A call's CallOptions (WithMaxAttempts, WithPolicy) change that call only:
//
//	resp, err := client.Get(ctx, req, grpcretry.WithMaxAttempts(1))
//
// Each call runs the steps of retry.Do (a retry.Call) with a copy of its
// Policy whose Backoff also obeys server pushback and whose Classify is
// replaced by the gRPC rules of the Options, so the Policy's Classify is
// not consulted (unless WithPolicyClassify). A failed call returns an
// error that carries the last attempt's status for status.FromError and
// status.Code and wraps a *retry.Error, so errors.Is finds
// retry.ErrAttemptsExhausted, retry.ErrBudgetExhausted, breaker.ErrOpen or
// the context's error.
func UnaryClientInterceptor(src retry.PolicySource, opts ...Option) grpc.UnaryClientInterceptor {
	return newInterceptor(src, opts).unary
}

func (ic *interceptor) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
	c := &unaryCall{
		ic: ic, ctx: ctx, method: method, req: req, reply: reply, cc: cc, invoker: invoker,
		idempotent: ic.idempotent(method),
	}
	// The attempt options: the caller's but their OnFinish callbacks (run
	// once, when the call ends) and this package's CallOptions, then ours
	// to read the headers (commit), the trailer (pushback) and, for a
	// method that is not idempotent, the peer (to learn whether the
	// request left).
	var onFinish []grpc.CallOption
	var cs callSettings
	c.opts, onFinish = splitCallOptions(c.optBuf[:0], callOpts, &cs)
	c.nbase = len(c.opts)
	c.opts = append(c.opts, grpc.Header(&c.header), grpc.Trailer(&c.trailer))
	if !c.idempotent {
		c.opts = append(c.opts, grpc.Peer(&c.peer))
	}
	ic.callPolicy(&c.pol, &c.bo, &cs)
	var err error
	var h *hedge.Hedger
	if ic.hedger != nil && c.idempotent {
		h = ic.hedgerNow()
	}
	c.ctx = ic.keyContext(ctx, method, cc, &c.pol, h)
	if m, ok := reply.(proto.Message); ok && h != nil && !c.pol.NestedForbids(ctx) {
		// Copies may be in flight together: the pushback each one carries
		// travels in its error (retry.After), not in bo.
		c.hedging, c.bo.fromErr = true, true
		err = c.hedged(m, h)
	} else {
		err = c.run()
	}
	err = finalError(err)
	runOnFinish(onFinish, err)
	return err
}

// run drives the call's attempts through a retry.Call — the steps of
// retry.Do, in its order — which also tells each attempt whether another
// may follow (WillRetry), for the announcement. An attempt whose code (an
// inner interceptor, the invoker, an Option's callback) panics is ended as
// failed (retry.Call.Panic) before the panic goes on, as retry.Do does.
func (c *unaryCall) run() error {
	d := retry.NewCall(c.ctx, &c.pol)
	var a retry.Attempt
	inOp := false
	defer func() {
		if inOp {
			r := recover()
			d.Panic(&a, r)
			if r != nil { // nil: runtime.Goexit, which goes on by itself
				panic(r)
			}
		}
	}()
	for {
		var gerr error
		if a, gerr = d.Begin(); gerr != nil {
			return gerr
		}
		inOp = true
		err := c.attempt(a.Context, a.N, d.WillRetry())
		inOp = false
		if err = d.End(&a, err); err == nil {
			d.Succeed()
			return nil
		}
		delay, gerr := d.Next(err)
		if gerr != nil {
			return gerr
		}
		d.Wait(delay)
	}
}

// unaryCall is the state of one intercepted unary call.
type unaryCall struct {
	ic         *interceptor
	ctx        context.Context
	method     string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption
	nbase      int // opts[:nbase] are the caller's; then this package's Header, Trailer, Peer
	idempotent bool
	hedging    bool // run by hedged: classify by WithNonFatalCodes

	hg       hedge.Hedger  // the interceptor's, under pol (hedged calls)
	replyMsg proto.Message // the caller's reply (hedged calls)
	cctx     callCtx       // the context of hedge.Do (hedged calls)
	meta     *callerMeta   // the caller's Header, Trailer, Peer, if any (hedged calls)

	pol     retry.Policy       // the caller's, with bo and notPermanent
	optBuf  [5]grpc.CallOption // holds opts unless the caller passed many
	header  metadata.MD        // written by grpc.Header: non-nil once headers arrived
	trailer metadata.MD        // written by grpc.Trailer
	peer    peer.Peer          // written by grpc.Peer
	bo      pushbackBackoff
}

// attempt makes attempt n with the attempt's context actx; willRetry is
// what the retry.Call says of a next one, for the announcement.
func (c *unaryCall) attempt(actx context.Context, n int, willRetry bool) error {
	c.header, c.trailer = nil, nil
	c.peer = peer.Peer{}
	c.bo.clear()
	err := c.invoker(c.ic.announce(actx, n, willRetry), c.method, c.req, c.reply, c.cc, c.opts...)
	if err == nil {
		return nil
	}
	return c.ic.classify(c.ctx, actx, attemptResult{
		err:        err,
		trailer:    c.trailer,
		idempotent: c.idempotent,
		hedged:     c.hedging,
		notSent:    !c.idempotent && c.peer.Addr == nil,
		// Response headers (not a Trailers-Only response) commit the call,
		// as in gRFC A6 and grpc-go: grpc.Header leaves the MD nil for a
		// Trailers-Only response or none at all.
		committed: c.header != nil,
	}, &c.bo)
}
