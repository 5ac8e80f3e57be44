package grpcretry

import (
	"context"
	"sync"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// UnaryHedgingInterceptor returns an interceptor that hedges unary calls
// to the methods declared idempotent (the declaration UnaryClientInterceptor
// uses for retries: WithIdempotentMethods, WithIdempotentServices, a proto
// idempotency_level, WithIdempotent): when no copy has answered within
// h's delay it sends another, up to h.MaxHedges, and the first answer
// wins, as hedge.Do does, under h.Policy. It is gRFC A6's hedgingPolicy,
// which grpc-go never shipped:
//
//   - maxAttempts is the Policy's MaxAttempts (Policy.AttemptLimit): the
//     first attempt, the hedges and the retries of one call together;
//   - hedgingDelay is h.Delay, or a percentile of recent latencies with
//     h.Adaptive;
//   - nonFatalStatusCodes is WithNonFatalCodes: a copy that fails with one
//     of them lets the other copies run (and, when every copy failed, the
//     call is retried after the Policy's backoff, hedged in turn); any
//     other code is fatal and ends the call at once, the other copies
//     cancelled. With no WithNonFatalCodes, as in A6, every code is fatal.
//
// Every copy carries grpc-previous-rpc-attempts (the number of attempts
// of the call before it, hedges and retries alike; absent on the first)
// and, unless WithAnnounce(false), stormguard-attempt and
// stormguard-will-retry. A copy whose server sent response headers and
// then failed is committed (its failure is final, as for retries). Server
// pushback obeys A6: the overload marker (grpc-retry-pushback-ms: -1)
// stops further hedges, lets the copies in flight answer, and is never
// retried; a positive pushback puts the next hedge off by that delay (and
// is the wait before a retry); a malformed pushback ends the call. The
// losers are cancelled through their contexts, so their servers see their
// contexts end; the call returns once every copy has returned. The
// caller's grpc.Header, grpc.Trailer and grpc.Peer options then receive
// the metadata of the copy whose answer the call returns (the winner, or
// the copy whose failure ended the call), never a loser's.
//
// Hedges spend from the Policy's Budget as retries do, ask its Breaker
// and are reported to its Observer (see package hedge): once the budget
// refuses, no further hedge starts, but copies in flight go on.
//
// Methods not declared idempotent are never hedged: they are sent, and
// retried only when the request provably never left, exactly as
// UnaryClientInterceptor(h.Policy, opts...) does. So is a call whose reply
// is not a proto.Message (each hedge needs a reply message of its own,
// made with ProtoReflect().New(); the winner's is merged into the
// caller's). The Options are UnaryClientInterceptor's, and the
// CallOptions WithMaxAttempts and WithPolicy apply to hedged calls too
// (WithPolicy replaces h.Policy for the call; WithMaxAttempts(1) makes a
// call that is neither hedged nor retried). Streams are not hedged: pair
// it with StreamClientInterceptor(h.Policy, opts...). A nil h is the zero
// Hedger (one hedge after hedge.DefaultDelay, under the zero Policy).
//
// The hedge settings follow a policy source as the Policy does: when
// h.Policy is also a HedgerSource (a *config.Handle is) and h has the
// settings it gives now (h is handle.Hedger()), the interceptor asks it
// for the Hedger once per call, right after the Policy, so a reload that
// changes the file's hedge block reaches the next call on the same
// connection, and one that removes it stops hedging. A Hedger with
// MaxHedges hedge.NoHedges (what a policy without hedge gives) hedges
// nothing: the call runs as UnaryClientInterceptor(h.Policy, opts...)
// would run it. Any other h is used as it is for every call.
func UnaryHedgingInterceptor(h *hedge.Hedger, opts ...Option) grpc.UnaryClientInterceptor {
	if h == nil {
		h = &hedge.Hedger{}
	}
	ic := newInterceptor(h.Policy, opts)
	ic.hedger = h
	if nf, ok := h.Policy.(NonFatalSource); ok {
		ic.nonFatals = nf
	}
	if hs, ok := h.Policy.(HedgerSource); ok {
		if cur := hs.Hedger(); cur != nil && sameSettings(cur, h) {
			ic.hedgers = hs
		}
	}
	return ic.unary
}

// HedgerSource gives the hedge settings of a call starting now. A
// *config.Handle implements it (Handle.Hedger): see
// UnaryHedgingInterceptor.
type HedgerSource interface {
	// Hedger returns the hedge settings a call starting now runs under.
	// The interceptor calls it once per call, from many goroutines at
	// once, so it must be safe for concurrent use and cheap. A nil
	// result, or one with MaxHedges hedge.NoHedges, means the call is
	// not hedged.
	Hedger() *hedge.Hedger
}

// sameSettings reports whether a and b hedge alike (their Policy aside,
// which may hold a type that == cannot compare).
func sameSettings(a, b *hedge.Hedger) bool {
	return a.Delay == b.Delay && a.MaxHedges == b.MaxHedges && a.Adaptive == b.Adaptive
}

// hedgerNow returns the Hedger a call starting now runs under, or nil
// when it is not hedged (no hedging interceptor, or MaxHedges
// hedge.NoHedges).
func (ic *interceptor) hedgerNow() *hedge.Hedger {
	h := ic.hedger
	if ic.hedgers != nil {
		h = ic.hedgers.Hedger()
	}
	if h == nil || h.MaxHedges < 0 {
		return nil
	}
	return h
}

// WithNonFatalCodes lists the status codes with which a hedged copy may
// fail without ending the call (gRFC A6's nonFatalStatusCodes): the other
// copies go on, and when none answers the call is retried. Any other code
// is fatal. It adds to earlier lists; codes.OK is ignored. When the
// Hedger's Policy is also a NonFatalSource (a *config.Handle is: a policy
// file's hedge.non_fatal_codes, or its retry_on.grpc_codes), the codes it
// names at the time of the failure are non-fatal too, so a reload of the
// file reaches the next failure. Only
// UnaryHedgingInterceptor reads it: for retries, see WithRetryable. An
// attempt cut by the Policy's AttemptTimeout is never fatal; the caller's
// own cancellation or deadline always ends the call.
func WithNonFatalCodes(cs ...codes.Code) Option {
	var set uint64
	for _, c := range cs {
		if c != codes.OK && c < 64 {
			set |= 1 << c
		}
	}
	return optionFunc(func(o *options) { o.nonFatal |= set })
}

// NonFatalSource names, for the policy in force now, the gRPC status
// codes with which a hedged copy may fail without ending the call. A
// *config.Handle implements it (Handle.GRPCNonFatal: hedge.non_fatal_codes,
// or else retry_on.grpc_codes); see WithNonFatalCodes.
type NonFatalSource interface {
	// GRPCNonFatal reports whether a hedged copy failing with the gRPC
	// status code (a codes.Code, never codes.OK) lets the other copies
	// of the call go on, under the policy in force now; false makes the
	// failure fatal, ending the call. It is asked at each such failure,
	// possibly from several goroutines at once, so it must be safe for
	// concurrent use.
	GRPCNonFatal(code uint32) bool
}

// nonFatal reports whether code c lets the other copies of a hedged call
// run: WithNonFatalCodes lists it, or the Hedger's Policy source does now.
func (ic *interceptor) nonFatal(c codes.Code) bool {
	if c < 64 && ic.o.nonFatal&(1<<c) != 0 {
		return true
	}
	return ic.nonFatals != nil && c != codes.OK && ic.nonFatals.GRPCNonFatal(uint32(c))
}

// hedged runs the call through hedge.Do under the call's Policy. The
// round's first copy (in the calling goroutine) writes into the caller's
// reply with the call's buffers; each hedge has its own reply, header,
// trailer and peer, and a winning hedge's reply is merged into the
// caller's. The caller's own grpc.Header, grpc.Trailer and grpc.Peer
// options go to no copy: once hedge.Do has returned (every copy has), they
// receive the metadata of the copy whose answer the call returns (the
// winner, or the copy whose failure ended the call), so a cancelled loser
// that finished later cannot overwrite them and two copies answering
// together do not write them at once.
func (c *unaryCall) hedged(reply proto.Message, h *hedge.Hedger) error {
	c.hg = *h
	c.hg.Policy = &c.pol
	c.replyMsg = reply
	c.cctx = callCtx{Context: c.ctx, c: c}
	c.takeCallerMeta()
	win, err := hedge.Do[proto.Message](&c.cctx, &c.hg, hedgeCopy, nil)
	c.giveCallerMeta(win)
	if err == nil && win != nil && win != reply {
		proto.Reset(reply)
		proto.Merge(reply, win)
	}
	return err
}

// callerMeta holds a hedged call's own grpc.Header, grpc.Trailer and
// grpc.Peer options, and what each hedge copy received for them.
type callerMeta struct {
	opts   []grpc.CallOption
	peer   bool // opts has a Peer
	mu     sync.Mutex
	copies []copyMeta
}

// copyMeta is what one hedge copy's grpc.Header, grpc.Trailer and
// grpc.Peer received.
type copyMeta struct {
	reply           proto.Message
	header, trailer metadata.MD
	peer            peer.Peer
}

// takeCallerMeta moves the caller's grpc.Header, grpc.Trailer and
// grpc.Peer options out of the options every copy is sent with (into
// c.meta), and, when the caller asked for the peer, has the round's first
// copy record it in c.peer. A call without them costs nothing.
func (c *unaryCall) takeCallerMeta() {
	k := 0
	for _, o := range c.opts[:c.nbase] {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
			if c.meta == nil {
				c.meta = new(callerMeta)
			}
			c.meta.opts = append(c.meta.opts, o)
			if _, ok := o.(grpc.PeerCallOption); ok {
				c.meta.peer = true
			}
			continue
		}
		c.opts[k] = o
		k++
	}
	if c.meta == nil {
		return
	}
	n := copy(c.opts[k:], c.opts[c.nbase:])
	clear(c.opts[k+n:])
	c.opts, c.nbase = c.opts[:k+n], k
	if c.meta.peer && c.idempotent { // else the Peer option is there already
		c.opts = append(c.opts, grpc.Peer(&c.peer))
	}
}

// giveCallerMeta writes into the caller's grpc.Header, grpc.Trailer and
// grpc.Peer targets the metadata of the copy whose value hedge.Do returned
// (win); with no such copy (no attempt ran) they are left as they are.
func (c *unaryCall) giveCallerMeta(win proto.Message) {
	if c.meta == nil || win == nil {
		return
	}
	var m *copyMeta
	if win == c.replyMsg {
		m = &copyMeta{header: c.header, trailer: c.trailer, peer: c.peer}
	} else {
		for i := range c.meta.copies {
			if c.meta.copies[i].reply == win {
				m = &c.meta.copies[i]
				break
			}
		}
		if m == nil {
			return
		}
	}
	for _, o := range c.meta.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = m.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = m.trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = m.peer
		}
	}
}

// callCtx is the context a hedged call runs hedge.Do with: the caller's,
// which also gives the call's state to hedgeCopy, so that the operation is
// a plain function, not a closure that would cost an allocation per call.
type callCtx struct {
	context.Context
	c *unaryCall
}

type callKey struct{}

func (x *callCtx) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return x.c
	}
	return x.Context.Value(key)
}

// hedgeCopy makes one copy of a hedged call, with the attempt's context
// (a descendant of the call's callCtx).
func hedgeCopy(actx context.Context) (proto.Message, error) {
	c := actx.Value(callKey{}).(*unaryCall)
	n, isHedge, _ := hedge.AttemptOf(actx)
	willRetry := c.willRetry(n)
	if !isHedge {
		return c.replyMsg, c.attempt(actx, n, willRetry)
	}
	m := copyMeta{reply: c.replyMsg.ProtoReflect().New().Interface()}
	opts := make([]grpc.CallOption, 0, c.nbase+3)
	opts = append(append(opts, c.opts[:c.nbase]...), grpc.Header(&m.header), grpc.Trailer(&m.trailer))
	if c.meta != nil && c.meta.peer {
		opts = append(opts, grpc.Peer(&m.peer))
	}
	err := c.invoker(c.ic.announce(actx, n, willRetry), c.method, c.req, m.reply, c.cc, opts...)
	if c.meta != nil {
		c.meta.mu.Lock()
		c.meta.copies = append(c.meta.copies, m)
		c.meta.mu.Unlock()
	}
	if err == nil {
		return m.reply, nil
	}
	return m.reply, c.ic.classify(c.ctx, actx, attemptResult{
		err: err, trailer: m.trailer, idempotent: true, hedged: true, committed: m.header != nil,
	}, &c.bo)
}

// willRetry is what retry.Call.WillRetry would say of attempt n of the
// call: another attempt may follow as far as the attempt limit says, or a
// caller further up retries the inbound call this one serves.
func (c *unaryCall) willRetry(n int) bool {
	if retry.CallerRetries(c.ctx) {
		return true
	}
	limit := c.pol.AttemptLimit()
	return limit <= 0 || n < limit
}
