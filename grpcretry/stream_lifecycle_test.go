package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Tests of how a stream's call ends when its caller does not simply read
// it to the end: cancellation, client-side send errors, and messages sent
// while a retry is pending. (Attempt timeouts: TestAttemptTimeoutRetried.)

// TestAbandonedStreamReported: a committed stream whose caller cancels and
// walks away still ends its attempt for the breaker and the Observer.
func TestAbandonedStreamReported(t *testing.T) {
	srv := newServer(outcome{block: true, before: 1})
	br := &countingBreaker{}
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Breaker: br, Observer: rec})
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.StreamingOutputCall(ctx, outputRequest(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel() // and never call Recv again
	c := <-rec.callEnded
	if c.Reason != retry.ReasonContext || c.Attempts != 1 {
		t.Fatalf("CallEnd %+v", c)
	}
	if allowed, done := br.counts(); allowed != 1 || done != 1 {
		t.Fatalf("breaker: %d allowed, %d done", allowed, done)
	}
	if got := rec.outcomes(); !slices.Equal(got, []retry.Outcome{retry.OutcomeCanceled}) {
		t.Fatalf("outcomes %v", got)
	}
	<-srv.canceled
	if _, err := stream.Recv(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv after the end: %v", err)
	}
}

// trackerBudget is a limitBudget that also follows attempts in flight.
type trackerBudget struct {
	limitBudget
	starts  []bool
	refunds int
}

func (b *trackerBudget) Start(r bool) {
	b.mu.Lock()
	b.starts = append(b.starts, r)
	b.mu.Unlock()
}

func (b *trackerBudget) Refund() {
	b.mu.Lock()
	b.refunds++
	b.mu.Unlock()
}

// TestStreamCancelDuringWait: a caller that cancels while RecvMsg waits to
// retry gets the context's error at once, and the retry the budget granted
// is refunded.
func TestStreamCancelDuringWait(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable})
	f := clocktest.NewFake()
	b := &trackerBudget{limitBudget: limitBudget{left: 5}}
	rec := newRecorder()
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Hour}, Clock: f, Budget: b, Observer: rec}
	client := dialRetry(t, serve(t, srv), p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.StreamingOutputCall(ctx, outputRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		f.BlockUntil(1) // RecvMsg is waiting out the hour
		cancel()
	}()
	_, err = stream.Recv()
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v (code %v)", err, status.Code(err))
	}
	if b.withdraw != 1 || b.refunds != 1 || !slices.Equal(b.starts, []bool{false}) {
		t.Fatalf("budget: %d withdrawn, %d refunded, starts %v", b.withdraw, b.refunds, b.starts)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonContext || c.Attempts != 1 {
		t.Fatalf("CallEnd %+v", c)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("%d attempts", attempts)
	}
}

// TestStreamClientSideSendError: a send the client itself refuses (here,
// over the maximum message size) aborts the stream; the call ends at once
// and the breaker is told, even if the caller never calls Recv.
func TestStreamClientSideSendError(t *testing.T) {
	srv := newServer()
	br := &countingBreaker{}
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Breaker: br, Observer: rec})
	stream, err := client.StreamingInputCall(context.Background(), grpc.MaxCallSendMsgSize(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(inputMessages(1, 10)[0]); err != nil {
		t.Fatal(err)
	}
	err = stream.Send(inputMessages(1, 1000)[0])
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Send: %v", err)
	}
	c := <-rec.callEnded
	if c.Reason != retry.ReasonPermanent || c.Attempts != 1 {
		t.Fatalf("CallEnd %+v", c)
	}
	if allowed, done := br.counts(); allowed != 1 || done != 1 {
		t.Fatalf("breaker: %d allowed, %d done", allowed, done)
	}
	if _, err := stream.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("CloseAndRecv: %v", err)
	}
}

// TestStreamCommittedDuringWait: messages that outgrow the replay limit
// while RecvMsg waits to retry commit the stream; the retry is abandoned
// (and refunded) rather than made without them.
func TestStreamCommittedDuringWait(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable, recv: 1})
	f := clocktest.NewFake()
	b := &trackerBudget{limitBudget: limitBudget{left: 5}}
	rec := newRecorder()
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Hour}, Clock: f, Budget: b, Observer: rec}
	client := dialRetry(t, serve(t, srv), p, WithMaxReplayBytes(50))
	stream, err := client.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int) error {
		return stream.Send(&testpb.StreamingOutputCallRequest{Payload: payload(fmt.Sprintf("message-%d", i))})
	}
	if err := send(0); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		errc <- err
	}()
	f.BlockUntil(1) // the first attempt failed; Recv waits out the hour
	var sendErr error
	for i := 1; i < 5 && sendErr == nil; i++ {
		sendErr = send(i)
	}
	if sendErr != io.EOF {
		t.Fatalf("Send past the limit on a failed attempt: %v, want io.EOF", sendErr)
	}
	f.Advance(time.Hour)
	err = <-errc
	if status.Code(err) != codes.Unavailable || errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("Recv: %v", err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("%d attempts: a retry was made without the messages past the limit", attempts)
	}
	if b.refunds != 1 {
		t.Fatalf("%d refunds, want 1", b.refunds)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonPermanent || c.Attempts != 1 {
		t.Fatalf("CallEnd %+v", c)
	}
}
