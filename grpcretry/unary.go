package grpcretry

import (
	"context"
	"strconv"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// UnaryClientInterceptor returns an interceptor that retries unary calls
// under p (nil: the zero Policy, so retry.DefaultMaxAttempts attempts),
// classifying failures by status code and honouring server pushback. Only
// methods declared idempotent (see Options) are retried once the request
// may have reached the server, and a call whose server sent response
// headers is committed: its failure is final (gRFC A6). grpc.OnFinish
// callbacks among the call options run once per call, with its error. See
// the package documentation for the rules. Pass at most one Options; a
// second one panics.
//
// Each call runs retry.Run with a copy of p whose Backoff also obeys server
// pushback and whose Classify is replaced by the gRPC rules of Options, so
// p.Classify is not consulted. A failed call returns an error that carries
// the last attempt's status for status.FromError and status.Code and wraps
// a *retry.Error, so errors.Is finds retry.ErrAttemptsExhausted,
// retry.ErrBudgetExhausted, breaker.ErrOpen or the context's error.
func UnaryClientInterceptor(p *retry.Policy, opts ...Options) grpc.UnaryClientInterceptor {
	return newInterceptor(p, opts).unary
}

func (ic *interceptor) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
	c := &unaryCall{
		ic: ic, ctx: ctx, method: method, req: req, reply: reply, cc: cc, invoker: invoker,
		idempotent: ic.idempotent(method),
	}
	// The attempt options: the caller's but their OnFinish callbacks (run
	// once, when the call ends), then ours to read the headers (commit),
	// the trailer (pushback) and, for a method that is not idempotent, the
	// peer (to learn whether the request left).
	var onFinish []grpc.CallOption
	c.opts, onFinish = splitOnFinish(c.optBuf[:0], callOpts)
	c.opts = append(c.opts, grpc.Header(&c.header), grpc.Trailer(&c.trailer))
	if !c.idempotent {
		c.opts = append(c.opts, grpc.Peer(&c.peer))
	}
	ic.callPolicy(&c.pol, &c.bo)
	err := finalError(retry.Run(ctx, &c.pol, c.attempt))
	runOnFinish(onFinish, err)
	return err
}

// splitOnFinish appends to dst the options of opts other than
// grpc.OnFinish, which it returns apart: the interceptor runs those once
// per call rather than letting every attempt run them.
func splitOnFinish(dst, opts []grpc.CallOption) (rest, onFinish []grpc.CallOption) {
	for _, o := range opts {
		if _, ok := o.(grpc.OnFinishCallOption); ok {
			onFinish = append(onFinish, o)
			continue
		}
		dst = append(dst, o)
	}
	return dst, onFinish
}

// runOnFinish calls the grpc.OnFinish callbacks with the call's error.
func runOnFinish(opts []grpc.CallOption, err error) {
	for _, o := range opts {
		o.(grpc.OnFinishCallOption).OnFinish(err)
	}
}

// notPermanent is the Classify of the per-call Policy: classify has already
// marked with retry.Permanent every error that must not be retried.
func notPermanent(error) bool { return true }

// callPolicy sets up one call's Policy in pol: the caller's, with bo (the
// Policy's backoff, obeying server pushback) and notPermanent.
func (ic *interceptor) callPolicy(pol *retry.Policy, bo *pushbackBackoff) {
	bo.base = ic.base
	*pol = *ic.p
	pol.Backoff = bo
	pol.Classify = notPermanent
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
	idempotent bool

	pol     retry.Policy       // the caller's, with bo and notPermanent
	optBuf  [5]grpc.CallOption // holds opts unless the caller passed many
	n       int                // attempts made
	header  metadata.MD        // written by grpc.Header: non-nil once headers arrived
	trailer metadata.MD        // written by grpc.Trailer
	peer    peer.Peer          // written by grpc.Peer
	bo      pushbackBackoff
}

func (c *unaryCall) attempt(actx context.Context) error {
	c.n++
	c.header, c.trailer = nil, nil
	c.peer = peer.Peer{}
	c.bo.clear()
	if c.n > 1 {
		actx = metadata.AppendToOutgoingContext(actx, PreviousAttemptsKey, strconv.Itoa(c.n-1))
	}
	err := c.invoker(actx, c.method, c.req, c.reply, c.cc, c.opts...)
	if err == nil {
		return nil
	}
	return c.ic.classify(c.ctx, actx, attemptResult{
		err:        err,
		trailer:    c.trailer,
		idempotent: c.idempotent,
		notSent:    !c.idempotent && c.peer.Addr == nil,
		// Response headers (not a Trailers-Only response) commit the call,
		// as in gRFC A6 and grpc-go: grpc.Header leaves the MD nil for a
		// Trailers-Only response or none at all.
		committed: c.header != nil,
	}, &c.bo)
}
