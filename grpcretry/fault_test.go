package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestBreakerOpensOnInternal (issue 25 blocker 3): a breaker behind the
// interceptor (the Policy's) opens after 5 Internal errors from a real
// server, although Internal is not retried: the attempts are marked
// retry.Permanent, and the breaker used to count them as successes and
// stay closed. The sixth call is refused without reaching the server.
func TestBreakerOpensOnInternal(t *testing.T) {
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			srv := &failingServer{code: codes.Internal}
			f := clocktest.NewFake()
			br := breaker.New(breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Minute, Clock: f})
			client := dialRetry(t, serveWith(t, nil, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Breaker: br, Clock: f})
			for i := range 5 {
				if err := callKind(context.Background(), client, method == "unary"); status.Code(err) != codes.Internal {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			if s, c := br.State(), br.Counts(); s != breaker.Open {
				t.Fatalf("after 5 Internal errors the breaker is %v (counts %+v), want open", s, c)
			}
			err := callKind(context.Background(), client, method == "unary")
			if !errors.Is(err, breaker.ErrOpen) || status.Code(err) != codes.Unavailable {
				t.Fatalf("sixth call: %v, want breaker.ErrOpen as Unavailable", err)
			}
			if n := srv.attempts.Load(); n != 5 {
				t.Fatalf("the server saw %d attempts, want 5 (Internal is not retried; the sixth is refused)", n)
			}
		})
	}
}

// TestDownstreamFaultCodes: for every code a real server can answer, the
// breaker behind the interceptor hears an error that counts as a failure
// (retry.IsDownstreamFault, the breaker's default) exactly for
// Unavailable, Internal, Unknown, DeadlineExceeded, ResourceExhausted and
// DataLoss; the call's own error says the same.
func TestDownstreamFaultCodes(t *testing.T) {
	faults := map[codes.Code]bool{
		codes.Unavailable: true, codes.Internal: true, codes.Unknown: true, codes.DeadlineExceeded: true,
		codes.ResourceExhausted: true, codes.DataLoss: true,
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		t.Run(c.String(), func(t *testing.T) {
			srv := newServer(outcome{code: c})
			br := &countingBreaker{}
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 1, Backoff: noWait, Breaker: br})
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if status.Code(err) != c {
				t.Fatalf("err = %v", err)
			}
			if len(br.results) != 1 {
				t.Fatalf("breaker results %v", br.results)
			}
			got := fmt.Sprintf("breaker hears fault=%v, call error fault=%v, IsFault=%v",
				retry.IsDownstreamFault(br.results[0]), retry.IsDownstreamFault(err), IsFault(c))
			want := fmt.Sprintf("breaker hears fault=%v, call error fault=%v, IsFault=%v", faults[c], faults[c], faults[c])
			if got != want {
				t.Fatalf("%v: %s, want %s", c, got, want)
			}
		})
	}
}

// TestDownstreamFaultAttemptDeadline: an attempt cut by the Policy's
// AttemptTimeout is a fault (the server did not answer in time), the
// caller's own cancellation is not.
func TestDownstreamFaultAttemptDeadline(t *testing.T) {
	t.Run("attempt timeout", func(t *testing.T) {
		srv := newServer(outcome{block: true})
		f := clocktest.NewFake()
		br := &countingBreaker{}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 1, AttemptTimeout: time.Minute, Clock: f, Breaker: br})
		go func() {
			<-srv.started
			f.Advance(time.Minute)
		}()
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || len(br.results) != 1 || !retry.IsDownstreamFault(br.results[0]) {
			t.Fatalf("err %v, breaker results %v: want one fault", err, br.results)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		srv := newServer(outcome{block: true})
		br := &countingBreaker{}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 1, Breaker: br})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-srv.started
			cancel()
		}()
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		if status.Code(err) != codes.Canceled || len(br.results) != 1 || retry.IsDownstreamFault(br.results[0]) {
			t.Fatalf("err %v, breaker results %v: want one result that is no fault", err, br.results)
		}
	})
}

// testLimiter is a retry.Limiter that admits the first admit attempts and
// records the result of each admitted one.
type testLimiter struct {
	mu      sync.Mutex
	admit   int
	results []codes.Code
}

var errTestThrottled = errors.New("test limiter: throttled")

func (l *testLimiter) Acquire(context.Context, bool) (func(error), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.admit <= 0 {
		return nil, errTestThrottled
	}
	l.admit--
	return func(err error) {
		l.mu.Lock()
		l.results = append(l.results, status.Code(err))
		l.mu.Unlock()
	}, nil
}

// TestLimiterThroughInterceptor (seam S5): the Policy's Limiter admits each
// attempt of a unary call or stream before it is sent, hears each admitted
// attempt's result once, and a refusal ends the call with ReasonThrottled
// and the limiter's error, as Unavailable, without reaching the server.
func TestLimiterThroughInterceptor(t *testing.T) {
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
			lim := &testLimiter{admit: 2}
			rec := newRecorder()
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Limiter: lim, Observer: rec})
			err := callMethod(context.Background(), client, method)
			if !errors.Is(err, errTestThrottled) || status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v, want the limiter's error as Unavailable", err)
			}
			if attempts, _, _, _ := srv.stats(); attempts != 2 {
				t.Fatalf("the server saw %d attempts, want 2 (the third refused)", attempts)
			}
			if got := fmt.Sprint(lim.results); got != "[Unavailable Unavailable]" {
				t.Fatalf("the limiter heard %s", got)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonThrottled {
				t.Fatalf("reason %v, want throttled", c.Reason)
			}
		})
	}
}
