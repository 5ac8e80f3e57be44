package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestAttemptDeadlineReachesServer: each attempt's deadline is the earlier
// of AttemptTimeout and the caller's, and the server sees it (grpc-timeout).
// Real clock: nothing here waits for either deadline.
func TestAttemptDeadlineReachesServer(t *testing.T) {
	cases := []struct {
		name   string
		caller time.Duration // 0: no caller deadline
		max    time.Duration // the server must see at most this
	}{
		{"attempt timeout only", 0, 5 * time.Second},
		{"caller deadline later", time.Hour, 5 * time.Second},
		{"caller deadline earlier", 2 * time.Second, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable})
			p := &retry.Policy{MaxAttempts: 2, Backoff: noWait, AttemptTimeout: 5 * time.Second}
			client := dialRetry(t, serve(t, srv), p)
			ctx := context.Background()
			if c.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.caller)
				defer cancel()
			}
			if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Fatalf("Recv: %v", err)
			}
			_, _, left, _ := srv.stats()
			if len(left) != 3 {
				t.Fatalf("%d attempts, want 3", len(left))
			}
			for i, l := range left {
				if l <= 0 || l > c.max {
					t.Fatalf("attempt %d: server saw %v left, want a deadline within %v", i+1, l, c.max)
				}
			}
		})
	}
}

// TestCallerCancelReachesServer: the caller's cancellation ends the
// server's handler, and is not retried.
func TestCallerCancelReachesServer(t *testing.T) {
	srv := newServer(outcome{block: true})
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Observer: rec})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.started
		cancel()
	}()
	_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v (code %v)", err, status.Code(err))
	}
	if n := <-srv.canceled; n != 1 {
		t.Fatalf("attempt %d saw the cancellation", n)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("%d attempts", attempts)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonContext || c.Attempts != 1 {
		t.Fatalf("CallEnd %+v", c)
	}
	if got := rec.outcomes(); !slices.Equal(got, []retry.Outcome{retry.OutcomeCanceled}) {
		t.Fatalf("outcomes %v", got)
	}
}

// TestAttemptTimeoutRetried: an attempt cut by AttemptTimeout (on the fake
// clock) — of a unary call, or of a stream before its first message — is
// cancelled on the server and retried; the Observer sees it as a timeout
// with code DeadlineExceeded.
func TestAttemptTimeoutRetried(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(testpb.TestServiceClient) error
	}{
		{"unary", func(client testpb.TestServiceClient) error {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			return err
		}},
		{"stream", func(client testpb.TestServiceClient) error {
			stream, err := client.StreamingOutputCall(context.Background(), outputRequest(2))
			if err != nil {
				return err
			}
			got, err := readAll(stream)
			if err == nil && len(got) != 2 {
				err = fmt.Errorf("received %q, want 2 messages", got)
			}
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(outcome{block: true})
			f := clocktest.NewFake()
			rec := newRecorder()
			p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, AttemptTimeout: time.Second, Clock: f, Observer: rec}
			client := dialRetry(t, serve(t, srv), p)
			errc := make(chan error, 1)
			go func() { errc <- c.call(client) }()
			<-srv.started
			f.Advance(time.Second)
			if n := <-srv.canceled; n != 1 {
				t.Fatalf("attempt %d cancelled", n)
			}
			if err := <-errc; err != nil {
				t.Fatalf("call failed: %v", err)
			}
			_, prev, _, _ := srv.stats()
			if !slices.Equal(prev, []string{"", "1"}) {
				t.Fatalf("previous attempts %q", prev)
			}
			if got := rec.outcomes(); !slices.Equal(got, []retry.Outcome{retry.OutcomeTimeout, retry.OutcomeSuccess}) {
				t.Fatalf("outcomes %v", got)
			}
			if got := rec.codes(); got[0] != codes.DeadlineExceeded {
				t.Fatalf("codes %v", got)
			}
			if err := rec.Ends()[0].Err; !errors.Is(err, retry.ErrAttemptTimeout) {
				t.Fatalf("attempt error %v is not an attempt timeout", err)
			}
		})
	}
}

// TestServerDeadlineExceeded: a DeadlineExceeded from the server is
// retried only when the attempt had a deadline of its own.
func TestServerDeadlineExceeded(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    int
	}{{0, 1}, {time.Hour, 2}} {
		srv := newServer(outcome{code: codes.DeadlineExceeded})
		p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, AttemptTimeout: c.timeout}
		client := dialRetry(t, serve(t, srv), p)
		_, _ = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if attempts, _, _, _ := srv.stats(); attempts != c.want {
			t.Fatalf("AttemptTimeout %v: %d attempts, want %d", c.timeout, attempts, c.want)
		}
	}
}

// TestCallerDeadlineNotRetried: the caller's own deadline (on the fake
// clock) ends the call; the attempt it cut is not retried.
func TestCallerDeadlineNotRetried(t *testing.T) {
	srv := newServer(outcome{block: true})
	f := clocktest.NewFake()
	rec := newRecorder()
	p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, Clock: f, Observer: rec}
	client := dialRetry(t, serve(t, srv), p)
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second, nil)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		errc <- err
	}()
	<-srv.started
	f.Advance(time.Second)
	err := <-errc
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v (code %v)", err, status.Code(err))
	}
	<-srv.canceled
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("%d attempts", attempts)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonContext {
		t.Fatalf("CallEnd %+v", c)
	}
}
