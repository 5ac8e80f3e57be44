package grpcretry

import (
	"context"
	"io"
	"sync"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// StreamClientInterceptor returns an interceptor that retries streaming
// calls under the Policy src gives (nil, or a nil Policy: the zero Policy,
// so retry.DefaultMaxAttempts attempts; asked once per call, as
// UnaryClientInterceptor does) while the stream is not committed, replaying the messages the
// client sent. Only methods declared idempotent (see Option) are retried
// once the stream has been created. A call's CallOptions (WithMaxAttempts,
// WithPolicy) change that call only.
//
// The stream's attempts go through the same checks as retry.Do, made by
// the same retry.Call in the same order — MaxAttempts, deadline, breaker,
// budget, AttemptTimeout, Observer — one attempt per underlying stream,
// from its creation to its end (which, once committed, may be long after
// the retries are over). As with UnaryClientInterceptor, the Policy's
// Classify is not consulted (unless WithPolicyClassify), and a failed
// stream returns, from NewStream or RecvMsg, an error that carries the
// last attempt's status and wraps a *retry.Error.
//
// An attempt is committed, and no longer retried, once the server has sent
// response headers (a response that is not Trailers-Only, as in gRFC A6),
// once a response message has been received, once the client's messages
// outgrow WithMaxReplayBytes's limit, or at once for a method that is not
// idempotent. The stream's Context does not commit it (grpc-go's does): it
// is the call's context, not one attempt's.
//
// grpc.OnFinish callbacks among the call options run once, when the call
// ends, with the call's error; the attempts do not run them.
func StreamClientInterceptor(src retry.PolicySource, opts ...Option) grpc.StreamClientInterceptor {
	return newInterceptor(src, opts).stream
}

func (ic *interceptor) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s := &clientStream{
		ic: ic, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts,
		idempotent: ic.idempotent(method),
	}
	var cs callSettings
	if !passThrough(opts) {
		s.opts, s.onFinish = splitCallOptions(make([]grpc.CallOption, 0, len(opts)), opts, &cs)
	}
	ic.callPolicy(&s.pol, &s.bo, &cs)
	ctx = ic.keyContext(ctx, method, cc, &s.pol, nil)
	s.ctx = ctx
	s.d = retry.NewCall(ctx, &s.pol)
	defer s.recoverPanic() // runs after callMu is released
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.stopWatch = context.AfterFunc(ctx, s.callerDone)
	if err := s.connect(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// clientStream is the grpc.ClientStream the interceptor returns. It keeps
// the messages sent so far and, when an attempt fails before it is
// committed, opens a new stream and sends them again.
//
// Locks, always taken in this order:
//   - callMu is held by whoever moves the call from one attempt to the
//     next or ends it (NewStream, RecvMsg on an attempt's end, a SendMsg
//     error, the caller's context ending); it guards d, bo and step's end.
//   - sendMu serialises sends on the underlying streams: the caller's
//     SendMsg and CloseSend (which grpc-go already forbids running
//     concurrently) and the replay of kept messages; it guards sendBroken.
//   - mu guards the fields below it, read by every method.
type clientStream struct {
	ic         *interceptor
	ctx        context.Context // the caller's
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	method     string
	streamer   grpc.Streamer
	opts       []grpc.CallOption // the caller's, without OnFinish and CallOptions
	onFinish   []grpc.CallOption // the caller's OnFinish, run once by finish
	idempotent bool
	stopWatch  func() bool // stops the context.AfterFunc watching ctx

	callMu sync.Mutex
	d      *retry.Call  // the retry loop, one step at a time
	pol    retry.Policy // the caller's, with bo and notPermanent
	bo     pushbackBackoff

	sendMu     sync.Mutex
	sendBroken bool // the current attempt's stream refused a send: keep, do not send

	mu        sync.Mutex
	cur       grpc.ClientStream // the current attempt's stream
	step      *retry.Attempt    // the current attempt
	live      *retry.Attempt    // the attempt begun and not yet ended, if any
	ended     bool              // the current attempt is over (a retry may follow)
	committed bool
	closeSent bool
	buf       []any // messages kept for replay
	bufBytes  int
	finished  bool
	final     error              // the call's error once finished (nil: success)
	callCtx   *streamContext     // made by the first Context call
	cancelCtx context.CancelFunc // ends callCtx when the call finishes
}

// connect makes attempts until one stream is up (nil) or the call ends (its
// final error). failed is the error of the attempt that just ended, or nil
// to begin with a new attempt. Called with callMu held.
func (s *clientStream) connect(failed error) error {
	for {
		if failed != nil {
			delay, gerr := s.d.Next(failed)
			if gerr != nil {
				return s.finish(gerr)
			}
			s.d.Wait(delay)
		}
		var final error
		if failed, final = s.open(); final != nil {
			return final
		}
		if failed == nil {
			return nil
		}
	}
}

// open begins an attempt, creates its stream and replays the kept messages.
// It returns the attempt's error when the stream cannot be created, or the
// call's final error when the attempt may not begin.
//
// It holds sendMu throughout, so that no message is sent (or kept, or
// found past the replay limit) between the check that the stream may still
// be retried and the end of the replay.
func (s *clientStream) open() (failed, final error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	committed := s.committed
	s.mu.Unlock()
	if committed { // messages past the replay limit were sent during the wait
		return nil, s.finish(s.d.Abandon())
	}
	a, gerr := s.d.Begin()
	if gerr != nil {
		return nil, s.finish(gerr)
	}
	st := &a
	s.setLive(st)
	s.bo.clear()
	sctx := s.ic.announce(st.Context, st.N, s.d.WillRetry())
	cs, err := s.streamer(sctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		// No stream, so nothing of the request left: even a method that is
		// not idempotent may be tried again.
		aerr := s.ic.classify(s.ctx, st.Context, attemptResult{err: err, idempotent: s.idempotent, notSent: true}, &s.bo)
		s.setLive(nil)
		return s.d.End(st, aerr), nil
	}
	s.mu.Lock()
	s.cur, s.step, s.ended = cs, st, false
	if !s.idempotent {
		s.commitLocked()
	}
	msgs, closeSent := s.buf, s.closeSent
	s.mu.Unlock()
	s.sendBroken = false
	for _, m := range msgs {
		if cs.SendMsg(m) != nil {
			// The new stream failed too; RecvMsg reports how.
			s.sendBroken = true
			break
		}
	}
	if closeSent && !s.sendBroken {
		_ = cs.CloseSend() // grpc-go's CloseSend always returns nil
	}
	return nil, nil
}

// setLive records the attempt in flight (nil: none), the one a panic ends.
func (s *clientStream) setLive(a *retry.Attempt) {
	s.mu.Lock()
	s.live = a
	s.mu.Unlock()
}

// finish ends the call with the retry.Call's verdict gerr (nil: success) and
// returns the error the caller sees.
func (s *clientStream) finish(gerr error) error {
	return s.finishWith(finalError(gerr))
}

// finishWith ends the call with the error the caller sees (nil: success),
// once: it ends the call's context and runs the caller's OnFinish callbacks.
func (s *clientStream) finishWith(final error) error {
	s.mu.Lock()
	if s.finished {
		final = s.final
		s.mu.Unlock()
		return final
	}
	s.finished, s.final, s.live = true, final, nil
	s.commitLocked()
	cancel := s.cancelCtx
	s.mu.Unlock()
	s.stopWatch()
	if cancel != nil {
		cancel()
	}
	runOnFinish(s.onFinish, final)
	return final
}

// recoverPanic, deferred by every method that runs code of the caller's
// (inner interceptors and streams, Option callbacks) inside an attempt,
// before any lock it takes, ends the attempt in flight and the call when
// that code panics — so that a breaker's probe permit, a budget's slot and
// the Observer's view are released (retry.Call.Panic) — and lets the panic
// go on. The stream then reports the panic from every method.
func (s *clientStream) recoverPanic() {
	v := recover()
	if v == nil {
		return
	}
	s.panicked(v, nil)
	panic(v)
}

// recoverPanicOf is recoverPanic for code that ran on attempt a only: if
// a has ended meanwhile (another goroutine moved the call on), the panic
// goes on without ending the attempt that followed.
func (s *clientStream) recoverPanicOf(a *retry.Attempt) {
	v := recover()
	if v == nil {
		return
	}
	s.panicked(v, a)
	panic(v)
}

func (s *clientStream) panicked(v any, of *retry.Attempt) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.mu.Lock()
	finished, live := s.finished, s.live
	if of != nil && live != of {
		s.mu.Unlock()
		return
	}
	s.live = nil
	s.mu.Unlock()
	if finished {
		return
	}
	if live != nil {
		s.d.Panic(live, v)
	}
	pe := &retry.PanicError{Value: v}
	s.finishWith(finalError(&retry.Error{Attempts: s.d.Attempts(), Reason: retry.ErrPanicked, Last: pe}))
}

// commitLocked stops retrying and releases the kept messages.
func (s *clientStream) commitLocked() {
	s.committed = true
	s.buf, s.bufBytes = nil, 0
}

// callerDone ends the current attempt and the call when the caller's
// context ends while no method of the stream is moving it along, so that a
// stream its caller abandons by cancelling still reports to the breaker,
// the budget and the Observer.
func (s *clientStream) callerDone() {
	s.end(attemptResult{err: s.ctx.Err()})
}

// end ends the current attempt with r, and with it the call, unless the
// call has ended already. r.idempotent is filled in here.
func (s *clientStream) end(r attemptResult) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.mu.Lock()
	finished, st := s.finished, s.step
	s.mu.Unlock()
	if finished {
		return
	}
	r.idempotent = s.idempotent
	aerr := s.ic.classify(s.ctx, st.Context, r, &s.bo)
	s.setLive(nil)
	_, gerr := s.d.Next(s.d.End(st, aerr))
	s.finish(gerr)
}

// SendMsg sends m on the current attempt and keeps it for replay until the
// stream is committed. While the stream may still be retried, a failed
// send returns nil (the message will be sent again on the next attempt);
// RecvMsg reports the stream's fate.
func (s *clientStream) SendMsg(m any) error {
	defer s.recoverPanic()
	err, clientErr := s.send(m)
	if clientErr {
		s.end(attemptResult{err: err, committed: true})
	}
	return err
}

// send is SendMsg under sendMu. clientErr reports an error of the
// client's own, which ends the call.
func (s *clientStream) send(m any) (err error, clientErr bool) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	cur, finished := s.cur, s.finished
	if !s.committed && !finished {
		size, ok := msgSize(m)
		if !ok || s.bufBytes+size > s.ic.maxReplay { // a negative limit keeps nothing
			s.commitLocked()
		} else {
			s.buf = append(s.buf, m)
			s.bufBytes += size
		}
	}
	committed := s.committed
	s.mu.Unlock()
	if s.sendBroken && !finished {
		if committed {
			return io.EOF, false
		}
		return nil, false
	}
	err = cur.SendMsg(m)
	clientErr = err != nil && err != io.EOF && !finished
	switch {
	case err == io.EOF && !committed && !finished:
		s.sendBroken = true
		err = nil
	case clientErr:
		// An error of the client's own (marshalling, message size): grpc-go
		// aborts the stream, and the caller may stop here. No retry: commit
		// before releasing sendMu, so that no replay can begin meanwhile.
		s.mu.Lock()
		s.commitLocked()
		s.mu.Unlock()
	}
	return err, clientErr
}

// CloseSend closes the send direction, now and on any later attempt.
func (s *clientStream) CloseSend() error {
	defer s.recoverPanic()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	s.closeSent = true
	cur := s.cur
	s.mu.Unlock()
	if s.sendBroken {
		return nil
	}
	return cur.CloseSend()
}

// RecvMsg receives the next message. When the current attempt fails before
// the stream is committed, and the Policy allows, it opens a new stream,
// replays the kept messages and goes on receiving from it.
func (s *clientStream) RecvMsg(m any) error {
	defer s.recoverPanic()
	for {
		s.mu.Lock()
		if s.finished {
			cur, final := s.cur, s.final
			s.mu.Unlock()
			if final == nil {
				return cur.RecvMsg(m)
			}
			return final
		}
		cur, st, committed := s.cur, s.step, s.committed
		s.mu.Unlock()

		err := cur.RecvMsg(m)
		if err == nil && s.desc.ServerStreams {
			if !committed { // a response message: this attempt is the one
				s.mu.Lock()
				s.commitLocked()
				s.mu.Unlock()
			}
			return nil
		}
		// The attempt is over: nil for a single response, io.EOF for the
		// end of a response stream, or how it failed.
		if done, rerr := s.attemptOver(cur, st, err); done {
			return rerr
		}
	}
}

// attemptOver handles the end of the current attempt st. It reports done
// with the error RecvMsg returns, or false when a new attempt is up.
func (s *clientStream) attemptOver(cur grpc.ClientStream, st *retry.Attempt, err error) (bool, error) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.mu.Lock()
	finished, final, committed := s.finished, s.final, s.committed
	s.ended = true
	s.mu.Unlock()
	switch {
	case finished: // ended meanwhile by the caller's context or a failed send
		if err == nil || err == io.EOF {
			return true, err
		}
		return true, final
	case err == nil || err == io.EOF:
		s.setLive(nil)
		s.d.End(st, nil)
		s.d.Succeed()
		s.finish(nil)
		return true, err
	}
	// Response headers commit the attempt (gRFC A6), whether or not the
	// caller read them: Header returns nil metadata for a Trailers-Only
	// response, or when the stream ended before any headers.
	if !committed {
		if md, _ := cur.Header(); md != nil {
			committed = true
			s.mu.Lock()
			s.commitLocked()
			s.mu.Unlock()
		}
	}
	aerr := s.ic.classify(s.ctx, st.Context, attemptResult{
		err:        err,
		trailer:    cur.Trailer(),
		idempotent: s.idempotent,
		committed:  committed,
	}, &s.bo)
	s.setLive(nil)
	if ferr := s.connect(s.d.End(st, aerr)); ferr != nil {
		return true, ferr
	}
	return false, nil
}

// Header returns the current attempt's header metadata. Headers commit the
// stream: the caller has seen this attempt's. (Headers read from an attempt
// that has already failed, while RecvMsg retries, commit nothing.)
func (s *clientStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	cur, st := s.cur, s.step
	s.mu.Unlock()
	defer s.recoverPanicOf(st)
	md, err := cur.Header()
	if err == nil && md != nil {
		s.mu.Lock()
		if s.cur == cur && !s.ended {
			s.commitLocked()
		}
		s.mu.Unlock()
	}
	return md, err
}

// Trailer returns the trailer metadata of the last attempt. Like grpc-go's,
// it may be called only after RecvMsg has returned a non-nil error.
func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	return cur.Trailer()
}

// Context returns the call's context, which, unlike grpc-go's, does not
// commit the stream: middleware may log from it without turning retries
// off. It carries the caller's values and is done when the caller's
// context is, or when the call has ended (its last attempt over, as
// grpc-go's stream context ends with the stream). Once the stream is
// committed, its values are those of the committed attempt's stream
// context (peer.FromContext finds that attempt's server); before, the
// caller's. grpc.Peer gives the server of the last attempt too.
func (s *clientStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.callCtx == nil {
		ctx, cancel := context.WithCancel(s.ctx)
		s.callCtx, s.cancelCtx = &streamContext{Context: ctx, s: s}, cancel
		if s.finished {
			cancel()
		}
	}
	return s.callCtx
}

// streamContext is the context Context returns.
type streamContext struct {
	context.Context // the caller's, ended with the call
	s               *clientStream
}

// Value looks key up in the committed attempt's stream context once there
// is one, and in the caller's context before.
func (c *streamContext) Value(key any) any {
	c.s.mu.Lock()
	cur, committed := c.s.cur, c.s.committed
	c.s.mu.Unlock()
	if committed && cur != nil {
		return cur.Context().Value(key)
	}
	return c.Context.Value(key)
}

// msgSize measures a message for the replay limit. Messages that are not
// protocol buffers cannot be measured (and are committed at once).
func msgSize(m any) (int, bool) {
	switch v := m.(type) {
	case proto.Message:
		return proto.Size(v), true
	case protoadapt.MessageV1:
		return proto.Size(protoadapt.MessageV2Of(v)), true
	}
	return 0, false
}
