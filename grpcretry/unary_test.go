package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// noWait is a backoff that retries at once, for tests about what is
// retried rather than when.
var noWait = backoff.Constant{}

func TestUnaryUnavailableTwiceThenOK(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
	f := clocktest.NewFake()
	rec := newRecorder()
	p := &retry.Policy{
		Operation:   "unary",
		MaxAttempts: 5,
		Backoff:     backoff.Constant{Interval: 100 * time.Millisecond},
		Clock:       f,
		Observer:    rec,
	}
	client := dialRetry(t, serve(t, srv), p)

	var resp *testpb.SimpleResponse
	err := driveWaits(t, f, func() (err error) {
		resp, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload("hello")})
		return err
	}, func(i int, d time.Duration) {
		if d != 100*time.Millisecond {
			t.Errorf("wait %d = %v, want the backoff's 100ms", i, d)
		}
	}, 2)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if string(resp.GetPayload().GetBody()) != "hello" {
		t.Fatalf("response %v", resp)
	}
	attempts, prev, _, received := srv.stats()
	if attempts != 3 {
		t.Fatalf("server saw %d attempts, want 3", attempts)
	}
	if want := []string{"", "1", "2"}; !slices.Equal(prev, want) {
		t.Fatalf("%s = %q, want %q", PreviousAttemptsKey, prev, want)
	}
	for i, r := range received {
		if !slices.Equal(r, []string{"hello"}) {
			t.Fatalf("attempt %d received %q", i+1, r)
		}
	}
	if got, want := rec.codes(), []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK}; !slices.Equal(got, want) {
		t.Fatalf("observed codes %v, want %v", got, want)
	}
	if got, want := rec.outcomes(), []retry.Outcome{retry.OutcomeError, retry.OutcomeError, retry.OutcomeSuccess}; !slices.Equal(got, want) {
		t.Fatalf("observed outcomes %v, want %v", got, want)
	}
	if c := rec.lastCall(t); c.Attempts != 3 || c.Reason != retry.ReasonSuccess || c.Operation != "unary" {
		t.Fatalf("CallEnd %+v", c)
	}
}

func TestUnaryInvalidArgumentOnce(t *testing.T) {
	srv := newServer(outcome{code: codes.InvalidArgument})
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Observer: rec})

	_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("server saw %d attempts, want 1", attempts)
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument || st.Message() != "scripted InvalidArgument on attempt 1" {
		t.Fatalf("status %v (ok %v), want the server's InvalidArgument unchanged", st, ok)
	}
	if err.Error() != "rpc error: code = InvalidArgument desc = scripted InvalidArgument on attempt 1" {
		t.Fatalf("Error() = %q: a call that was not retried reads as without the interceptor", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != nil {
		t.Fatalf("retry.Error %+v", re)
	}
	var ae *AttemptError
	if !errors.As(err, &ae) || ae.Code() != codes.InvalidArgument {
		t.Fatalf("AttemptError %+v", ae)
	}
	if got := rec.outcomes(); !slices.Equal(got, []retry.Outcome{retry.OutcomePermanent}) {
		t.Fatalf("outcomes %v", got)
	}
}

// TestUnaryCodeTable checks the classification of every status code the
// server can return, with and without the Options that widen it.
func TestUnaryCodeTable(t *testing.T) {
	cases := []struct {
		code codes.Code
		o    []Option
		want int // attempts: 2 when retried, 1 when not
	}{
		{codes.Unavailable, nil, 2},
		{codes.Aborted, nil, 2},
		{codes.ResourceExhausted, nil, 1},
		{codes.ResourceExhausted, []Option{WithRetryResourceExhausted(true)}, 2},
		{codes.Internal, nil, 1},
		{codes.Internal, []Option{WithRetryInternal(true)}, 2},
		{codes.DeadlineExceeded, nil, 1}, // no attempt deadline of its own: the caller's
		{codes.Canceled, nil, 1},
		{codes.Unknown, nil, 1},
		{codes.InvalidArgument, nil, 1},
		{codes.NotFound, nil, 1},
		{codes.AlreadyExists, nil, 1},
		{codes.PermissionDenied, nil, 1},
		{codes.Unauthenticated, nil, 1},
		{codes.FailedPrecondition, nil, 1},
		{codes.OutOfRange, nil, 1},
		{codes.Unimplemented, nil, 1},
		{codes.DataLoss, nil, 1},
		{codes.NotFound, []Option{WithRetryable(func(c codes.Code) bool { return c == codes.NotFound })}, 2},
		{codes.Unavailable, []Option{WithRetryable(func(c codes.Code) bool { return c == codes.NotFound })}, 1},
	}
	for _, c := range cases {
		t.Run(c.code.String(), func(t *testing.T) {
			srv := newServer(outcome{code: c.code})
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait}, c.o...)
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			attempts, _, _, _ := srv.stats()
			if attempts != c.want {
				t.Fatalf("%v with %d options: %d attempts, want %d (err %v)", c.code, len(c.o), attempts, c.want, err)
			}
			if (c.want == 2) != (err == nil) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestUnaryAttemptsExhausted(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait})
	_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("err = %v, want ErrAttemptsExhausted", err)
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || st.Message() != "scripted Unavailable on attempt 3" {
		t.Fatalf("status %v: want the last attempt's, unchanged", st)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("status.Code = %v", status.Code(err))
	}
}

func TestUnaryBudgetAndBreaker(t *testing.T) {
	t.Run("budget refuses the retry", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable})
		b := &limitBudget{}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Budget: b})
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if !errors.Is(err, retry.ErrBudgetExhausted) || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v (code %v)", err, status.Code(err))
		}
		if attempts, _, _, _ := srv.stats(); attempts != 1 {
			t.Fatalf("%d attempts, want 1", attempts)
		}
		if b.withdraw != 1 || !slices.Equal(b.records, []bool{false}) {
			t.Fatalf("budget saw %d withdrawals, records %v", b.withdraw, b.records)
		}
	})
	t.Run("budget grants one retry", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
		b := &limitBudget{left: 1}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Budget: b})
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if !errors.Is(err, retry.ErrBudgetExhausted) {
			t.Fatalf("err = %v", err)
		}
		if !slices.Equal(b.records, []bool{false, true}) {
			t.Fatalf("records %v", b.records)
		}
	})
	t.Run("open breaker sends nothing", func(t *testing.T) {
		srv := newServer()
		br := &countingBreaker{refuse: errTestOpen}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Breaker: br})
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if !errors.Is(err, errTestOpen) || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v (code %v), want the breaker's error as Unavailable", err, status.Code(err))
		}
		if attempts, _, _, _ := srv.stats(); attempts != 0 {
			t.Fatalf("%d attempts reached the server", attempts)
		}
	})
	t.Run("breaker sees every attempt", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable})
		br := &countingBreaker{}
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 5, Backoff: noWait, Breaker: br})
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if allowed, done := br.counts(); allowed != 2 || done != 2 {
			t.Fatalf("breaker: %d allowed, %d done", allowed, done)
		}
		if status.Code(br.results[0]) != codes.Unavailable || br.results[1] != nil {
			t.Fatalf("breaker results %v", br.results)
		}
	})
}

func TestNilPolicy(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"0"}})
	client := dialRetry(t, serve(t, srv), nil)
	within(t, func() {
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Errorf("nil policy: %v", err)
		}
	})
}

// TestUnaryCommittedOnHeaders (issue 18 item 7): a unary call whose server
// sent response headers before failing is committed (gRFC A6, as grpc-go's
// own retry does), whether the headers were sent (grpc.SendHeader) or set
// and sent with the status (grpc.SetHeader); a Trailers-Only failure is
// retried.
func TestUnaryCommittedOnHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		o    outcome
		want int
	}{
		{"Trailers-Only", outcome{code: codes.Unavailable}, 2},
		{"SendHeader", outcome{code: codes.Unavailable, header: true}, 1},
		{"SetHeader", outcome{code: codes.Unavailable, set: true}, 1},
		{"SendHeader, attempt timeout", outcome{header: true, block: true}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(c.o)
			f := clocktest.NewFake()
			rec := newRecorder()
			p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, AttemptTimeout: time.Minute, Clock: f, Observer: rec}
			headers := make(chan struct{}, 4)
			client := dial(t, serve(t, srv),
				grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, WithIdempotentServices(testService))),
				grpc.WithStatsHandler(headerSignal(headers)))
			if c.o.block {
				go func() {
					<-headers // the client has the headers
					f.Advance(time.Minute)
				}()
			}
			var md metadata.MD
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&md))
			attempts, _, _, _ := srv.stats()
			if attempts != c.want {
				t.Fatalf("%d attempts (err %v), want %d", attempts, err, c.want)
			}
			if c.want == 2 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("the committed attempt's failure was not returned")
			}
			if got := md.Get("attempt"); !slices.Equal(got, []string{"1"}) {
				t.Fatalf("caller's grpc.Header saw %q", got)
			}
			var ae *AttemptError
			if !errors.As(err, &ae) || !ae.Committed {
				t.Fatalf("AttemptError %+v does not say it was committed", ae)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonPermanent {
				t.Fatalf("CallEnd %+v", c)
			}
		})
	}
}

// TestOnFinishOncePerCall (issue 18 item 9): grpc.OnFinish callbacks run
// once per call, with the call's error, not once per attempt.
func TestOnFinishOncePerCall(t *testing.T) {
	for _, fail := range []bool{false, true} {
		srv := newServer()
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 2, Backoff: noWait})
		var mu sync.Mutex
		var got []error
		onFinish := grpc.OnFinish(func(err error) {
			mu.Lock()
			got = append(got, err)
			mu.Unlock()
		})
		check := func(what string, callErr error) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || (got[0] == nil) != (callErr == nil) || status.Code(got[0]) != status.Code(callErr) {
				t.Fatalf("fail %v, %s: OnFinish saw %v, want once the call's %v", fail, what, got, callErr)
			}
			got = nil
		}
		script := []outcome{{code: codes.Unavailable}}
		if fail {
			script = append(script, outcome{code: codes.Unavailable})
		}

		srv.reset(script...)
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, onFinish)
		check("unary", err)
		if attempts, _, _, _ := srv.stats(); attempts != 2 {
			t.Fatalf("unary: %d attempts", attempts)
		}

		srv.reset(script...)
		stream, err := client.StreamingOutputCall(context.Background(), outputRequest(1), onFinish)
		if err != nil {
			t.Fatal(err)
		}
		_, err = readAll(stream)
		check("stream", err)
		if attempts, _, _, _ := srv.stats(); attempts != 2 {
			t.Fatalf("stream: %d attempts", attempts)
		}
	}
}

// TestNilPolicyDefaultAttempts (issue 18 item 8): a nil Policy makes the
// core's DefaultMaxAttempts, never "until the context ends" — here a call
// without a deadline against a server that always fails, asking (pushback
// 0) for an immediate retry.
func TestNilPolicyDefaultAttempts(t *testing.T) {
	var script []outcome
	for range 10 {
		script = append(script, outcome{code: codes.Unavailable, pushback: []string{"0"}})
	}
	srv := newServer(script...)
	client := dialRetry(t, serve(t, srv), nil)
	var err error
	within(t, func() { _, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{}) })
	if !errors.Is(err, retry.ErrAttemptsExhausted) || status.Code(err) != codes.Unavailable {
		t.Fatalf("unary: %v", err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != retry.DefaultMaxAttempts {
		t.Fatalf("unary: %d attempts, want %d", attempts, retry.DefaultMaxAttempts)
	}
	srv.reset(script...)
	within(t, func() {
		var stream testpb.TestService_StreamingOutputCallClient
		if stream, err = client.StreamingOutputCall(context.Background(), outputRequest(1)); err == nil {
			_, err = readAll(stream)
		}
	})
	if !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("stream: %v", err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != retry.DefaultMaxAttempts {
		t.Fatalf("stream: %d attempts, want %d", attempts, retry.DefaultMaxAttempts)
	}
}

// headerSignal is a client stats handler that signals every response
// header the client receives (not a Trailers-Only response).
type headerSignal chan struct{}

func (h headerSignal) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h headerSignal) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (h headerSignal) HandleConn(context.Context, stats.ConnStats) {}
func (h headerSignal) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.InHeader); ok {
		h <- struct{}{}
	}
}

// TestPolicyClassify: WithPolicyClassify lets the Policy's Classify (asked
// with the *AttemptError) replace the code table; WithRetryable still comes
// first, and a Policy without Classify keeps the table.
func TestPolicyClassify(t *testing.T) {
	notFound := func(err error) bool { return status.Code(err) == codes.NotFound }
	onlyAborted := func(c codes.Code) bool { return c == codes.Aborted }
	cases := []struct {
		name     string
		classify func(error) bool
		opts     []Option
		code     codes.Code
		attempts int
	}{
		{"without the option: the table", notFound, nil, codes.NotFound, 1},
		{"without the option: the table retries Unavailable", notFound, nil, codes.Unavailable, 2},
		{"Classify retries NotFound", notFound, []Option{WithPolicyClassify()}, codes.NotFound, 2},
		{"Classify does not retry Unavailable", notFound, []Option{WithPolicyClassify()}, codes.Unavailable, 1},
		{"no Classify: the table", nil, []Option{WithPolicyClassify()}, codes.Unavailable, 2},
		{"WithRetryable first", notFound, []Option{WithPolicyClassify(), WithRetryable(onlyAborted)}, codes.NotFound, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(outcome{code: c.code})
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Classify: c.classify}, c.opts...)
			_, _ = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if attempts, _, _, _ := srv.stats(); attempts != c.attempts {
				t.Fatalf("%d attempts, want %d", attempts, c.attempts)
			}
		})
	}
}

// errorBackoff is a retry.ErrorBackoff that records the failures it hears.
type errorBackoff struct {
	mu    sync.Mutex
	heard []codes.Code
}

func (b *errorBackoff) Delay(int, time.Duration) time.Duration { return 0 }

func (b *errorBackoff) DelayAfter(_ int, _ time.Duration, err error) time.Duration {
	b.mu.Lock()
	b.heard = append(b.heard, status.Code(err))
	b.mu.Unlock()
	return 0
}

// TestErrorBackoffHearsAttempts: a Policy.Backoff that implements
// retry.ErrorBackoff (awsretry.Rules) hears each failed attempt's error
// through the interceptors' pushback wrapper, for unary calls and streams.
func TestErrorBackoffHearsAttempts(t *testing.T) {
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Aborted})
			bo := &errorBackoff{}
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: bo})
			if err := callMethod(context.Background(), client, method); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(bo.heard); got != "[Unavailable Aborted]" {
				t.Fatalf("the backoff heard %s, want [Unavailable Aborted]", got)
			}
		})
	}
}
