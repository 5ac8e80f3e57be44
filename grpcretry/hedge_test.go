package grpcretry

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Tests of UnaryHedgingInterceptor against the scripted loopback server,
// with the hedge timer on a fake clock: a hedge starts when the test
// advances the clock by the delay, never by waiting.

const hedgeDelay = 50 * time.Millisecond

// hedgeRecorder records attempts and calls (retry.Observer) and hedge
// events (hedge.Observer), and hands each AttemptEnd to ended, so a test
// can wait for a copy's failure to reach the client.
type hedgeRecorder struct {
	retrytest.Recorder
	hedge.NopObserver
	ended     chan retry.AttemptEnd     // buffered
	scheduled chan retry.RetryScheduled // buffered

	mu      sync.Mutex
	refused []retry.Reason
	won     []int
}

func newHedgeRecorder() *hedgeRecorder {
	return &hedgeRecorder{ended: make(chan retry.AttemptEnd, 16), scheduled: make(chan retry.RetryScheduled, 16)}
}

func (r *hedgeRecorder) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	r.Recorder.RetryScheduled(ctx, e)
	r.scheduled <- e
}

func (r *hedgeRecorder) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	r.Recorder.AttemptEnd(ctx, e)
	r.ended <- e
}

func (r *hedgeRecorder) HedgeRefused(_ context.Context, e hedge.Event) {
	r.mu.Lock()
	r.refused = append(r.refused, e.Reason)
	r.mu.Unlock()
}

func (r *hedgeRecorder) HedgeWon(_ context.Context, e hedge.Event) {
	r.mu.Lock()
	r.won = append(r.won, e.Attempt)
	r.mu.Unlock()
}

func (r *hedgeRecorder) events() (refused []retry.Reason, won []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refused), slices.Clone(r.won)
}

// waitEnd waits for the next AttemptEnd and returns it.
func (r *hedgeRecorder) waitEnd(t *testing.T) retry.AttemptEnd {
	t.Helper()
	select {
	case e := <-r.ended:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt ended")
		return retry.AttemptEnd{}
	}
}

// hedgeClient connects to srv through UnaryHedgingInterceptor(h, o...),
// with the test service declared idempotent unless o says otherwise.
func hedgeClient(t *testing.T, srv *server, h *hedge.Hedger, o ...Option) testpb.TestServiceClient {
	t.Helper()
	return hedgeClientWith(t, srv, h, nil, o...)
}

func hedgeClientWith(t *testing.T, srv *server, h *hedge.Hedger, inner grpc.UnaryClientInterceptor, o ...Option) testpb.TestServiceClient {
	t.Helper()
	o = append([]Option{WithIdempotentServices(testService)}, o...)
	ics := []grpc.UnaryClientInterceptor{UnaryHedgingInterceptor(h, o...)}
	if inner != nil {
		ics = append(ics, inner)
	}
	return dial(t, serve(t, srv), grpc.WithChainUnaryInterceptor(ics...))
}

type callResult struct {
	resp *testpb.SimpleResponse
	err  error
}

// goCall starts a unary call with body in a goroutine.
func goCall(client testpb.TestServiceClient, body string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload(body)})
		ch <- callResult{resp, err}
	}()
	return ch
}

func result(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return")
		return callResult{}
	}
}

// started waits for the server to start an attempt and returns its number.
func started(t *testing.T, srv *server) int {
	t.Helper()
	select {
	case n := <-srv.started:
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt reached the server")
		return 0
	}
}

func canceled(t *testing.T, srv *server) int {
	t.Helper()
	select {
	case n := <-srv.canceled:
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt was cancelled on the server")
		return 0
	}
}

// hedgeAt waits for the hedge timer, checks that it is due in exactly d,
// fires it, and returns the number of the attempt it started.
func hedgeAt(t *testing.T, f *clocktest.Fake, srv *server, d time.Duration) int {
	t.Helper()
	f.BlockUntil(1)
	if got := f.Deadlines(); len(got) != 1 || got[0] != d {
		t.Fatalf("pending timers %v, want the hedge timer at %v", got, d)
	}
	f.Advance(d - time.Millisecond)
	select {
	case n := <-srv.started:
		t.Fatalf("attempt %d started before the hedge delay", n)
	default:
	}
	f.Advance(time.Millisecond)
	return started(t, srv)
}

// TestHedgeWinsFirstCancelled: the first copy hangs; a hedge starts at
// exactly the delay, and another a delay later; the third answers and
// wins, and the server sees the contexts of the other two end. Each copy
// carries grpc-previous-rpc-attempts (the number of copies before it) and
// the announcement.
func TestHedgeWinsFirstCancelled(t *testing.T) {
	f := clocktest.NewFake()
	srv := newServer(outcome{block: true}, outcome{block: true}, outcome{})
	rec := newHedgeRecorder()
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Observer: rec}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay, MaxHedges: 2})

	res := goCall(client, "hello")
	if n := started(t, srv); n != 1 {
		t.Fatalf("attempt %d started first", n)
	}
	if n := hedgeAt(t, f, srv, hedgeDelay); n != 2 {
		t.Fatalf("attempt %d started as the first hedge", n)
	}
	if n := hedgeAt(t, f, srv, hedgeDelay); n != 3 {
		t.Fatalf("attempt %d started as the second hedge", n)
	}
	r := result(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := string(r.resp.GetPayload().GetBody()); got != "hello" {
		t.Fatalf("reply body %q, want the winner's %q", got, "hello")
	}
	got := []int{canceled(t, srv), canceled(t, srv)}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("cancelled on the server: %v, want [1 2]", got)
	}
	_, prev, _, _ := srv.stats()
	if want := []string{"", "1", "2"}; !slices.Equal(prev, want) {
		t.Fatalf("grpc-previous-rpc-attempts per copy %q, want %q", prev, want)
	}
	if got, want := srv.announced(), []string{"1/1/-", "2/1/1", "3/0/2"}; !slices.Equal(got, want) {
		t.Fatalf("announced %q, want %q", got, want)
	}
	if _, won := rec.events(); !slices.Equal(won, []int{3}) {
		t.Fatalf("HedgeWon for attempts %v, want [3]", won)
	}
	if f.Pending() != 0 {
		t.Fatalf("%d timers left pending", f.Pending())
	}
}

// TestHedgeFatalCodeEndsCall: a code not listed by WithNonFatalCodes (with
// none listed, any code, as in gRFC A6) from one copy ends the call at
// once with that code, and the other copy is cancelled on the server.
func TestHedgeFatalCodeEndsCall(t *testing.T) {
	for _, c := range []struct {
		name string
		code codes.Code
		o    []Option
	}{
		{name: "no non-fatal codes", code: codes.Unavailable},
		{name: "not listed", code: codes.InvalidArgument, o: []Option{WithNonFatalCodes(codes.Unavailable)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := clocktest.NewFake()
			srv := newServer(outcome{block: true}, outcome{code: c.code})
			p := &retry.Policy{MaxAttempts: 5, Clock: f, Backoff: noWait}
			client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, c.o...)
			res := goCall(client, "x")
			started(t, srv)
			hedgeAt(t, f, srv, hedgeDelay)
			r := result(t, res)
			if status.Code(r.err) != c.code {
				t.Fatalf("call error %v, want code %v", r.err, c.code)
			}
			if n := canceled(t, srv); n != 1 {
				t.Fatalf("attempt %d cancelled, want the first", n)
			}
			if n, _, _, _ := srv.stats(); n != 2 {
				t.Fatalf("%d attempts, want 2 (a fatal code is not retried)", n)
			}
		})
	}
}

// TestHedgeNonFatalCodeLetsOtherWin: a hedge that fails with a non-fatal
// code does not stop the first copy, which then answers and wins.
func TestHedgeNonFatalCodeLetsOtherWin(t *testing.T) {
	f := clocktest.NewFake()
	gate := make(chan struct{})
	srv := newServer(outcome{wait: gate}, outcome{code: codes.Unavailable})
	rec := newHedgeRecorder()
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Observer: rec}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, WithNonFatalCodes(codes.Unavailable))
	res := goCall(client, "first")
	started(t, srv)
	hedgeAt(t, f, srv, hedgeDelay)
	if e := rec.waitEnd(t); e.Attempt != 2 || status.Code(e.Err) != codes.Unavailable {
		t.Fatalf("first AttemptEnd %+v, want the hedge's Unavailable", e)
	}
	close(gate)
	r := result(t, res)
	if r.err != nil {
		t.Fatalf("call error %v, want the first copy's answer", r.err)
	}
	if got := string(r.resp.GetPayload().GetBody()); got != "first" {
		t.Fatalf("reply body %q", got)
	}
	if n, _, _, _ := srv.stats(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestHedgeNonIdempotentNeverHedged: a method not declared idempotent is
// sent once: no hedge timer is armed while it hangs, and a failure that
// may have reached the server is not retried.
func TestHedgeNonIdempotentNeverHedged(t *testing.T) {
	f := clocktest.NewFake()
	gate := make(chan struct{})
	srv := newServer(outcome{wait: gate, code: codes.Unavailable})
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Backoff: noWait}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, WithNonIdempotent(unaryMethod), WithNonFatalCodes(codes.Unavailable))
	res := goCall(client, "x")
	started(t, srv)
	if n := f.Pending(); n != 0 {
		t.Fatalf("%d timers pending while a non-idempotent call is in flight, want no hedge timer", n)
	}
	close(gate)
	if r := result(t, res); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call error %v", r.err)
	}
	if n, _, _, _ := srv.stats(); n != 1 {
		t.Fatalf("%d attempts of a non-idempotent method, want 1", n)
	}
}

// TestHedgeBudgetRefusalStopsNewHedges: the budget grants one hedge and
// refuses the next; the refused hedge never starts, no timer is armed
// after it, and the hedge already running goes on and wins.
func TestHedgeBudgetRefusalStopsNewHedges(t *testing.T) {
	f := clocktest.NewFake()
	gate := make(chan struct{})
	srv := newServer(outcome{block: true}, outcome{wait: gate})
	rec := newHedgeRecorder()
	budget := &limitBudget{left: 1}
	p := &retry.Policy{MaxAttempts: 5, Clock: f, Budget: budget, Observer: rec}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay, MaxHedges: 3})
	res := goCall(client, "x")
	started(t, srv)
	hedgeAt(t, f, srv, hedgeDelay)
	f.BlockUntil(1)
	f.Advance(hedgeDelay) // the second hedge is due: the budget refuses it
	if refused, _ := rec.events(); !slices.Equal(refused, []retry.Reason{retry.ReasonBudget}) {
		t.Fatalf("HedgeRefused reasons %v, want [budget]", refused)
	}
	if n := f.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the refusal, want none", n)
	}
	close(gate) // the running hedge answers
	if r := result(t, res); r.err != nil {
		t.Fatalf("call error %v, want the running hedge's answer", r.err)
	}
	if n := canceled(t, srv); n != 1 {
		t.Fatalf("attempt %d cancelled, want the first", n)
	}
	if n, _, _, _ := srv.stats(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	budget.mu.Lock()
	defer budget.mu.Unlock()
	if budget.withdraw != 2 {
		t.Fatalf("%d withdrawals, want 2 (one granted hedge, one refused)", budget.withdraw)
	}
}

// TestHedgePushbackStopsHedges: a copy's overload marker
// (grpc-retry-pushback-ms: -1) stops further hedges but lets the copy in
// flight answer; if that one fails too, the call is not retried and its
// error wraps retry.ErrOverloaded.
func TestHedgePushbackStopsHedges(t *testing.T) {
	for _, c := range []struct {
		name  string
		first codes.Code
	}{{"first answers", codes.OK}, {"first fails", codes.Unavailable}} {
		t.Run(c.name, func(t *testing.T) {
			f := clocktest.NewFake()
			gate := make(chan struct{})
			srv := newServer(outcome{wait: gate, code: c.first}, outcome{code: codes.Unavailable, pushback: []string{"-1"}})
			rec := newHedgeRecorder()
			p := &retry.Policy{MaxAttempts: 5, Clock: f, Observer: rec, Backoff: noWait}
			client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay, MaxHedges: 3}, WithNonFatalCodes(codes.Unavailable))
			res := goCall(client, "x")
			started(t, srv)
			hedgeAt(t, f, srv, hedgeDelay)
			if e := rec.waitEnd(t); e.Attempt != 2 {
				t.Fatalf("AttemptEnd %+v, want the hedge's", e)
			}
			// The next hedge would be due now: none starts (a hedge's
			// AttemptStart comes within Advance, from the timer's callback).
			f.Advance(hedgeDelay)
			if n := len(rec.Starts()); n != 2 {
				t.Fatalf("%d attempts started after the pushback, want 2", n)
			}
			close(gate)
			r := result(t, res)
			switch c.first {
			case codes.OK:
				if r.err != nil {
					t.Fatalf("call error %v, want the first copy's answer", r.err)
				}
			default:
				if !errors.Is(r.err, retry.ErrOverloaded) || status.Code(r.err) != codes.Unavailable {
					t.Fatalf("call error %v, want Unavailable wrapping retry.ErrOverloaded", r.err)
				}
			}
			if n, _, _, _ := srv.stats(); n != 2 {
				t.Fatalf("%d attempts, want 2: no hedge or retry after the marker", n)
			}
		})
	}
}

// TestHedgeMaxAttemptsBoundsHedgesAndRetries: MaxAttempts 3 with one
// hedge: the first copy and its hedge fail with a non-fatal code, the call
// retries once (attempt 3), and that retry is not hedged because the
// attempt limit is reached.
func TestHedgeMaxAttemptsBoundsHedgesAndRetries(t *testing.T) {
	f := clocktest.NewFake()
	gate := make(chan struct{})
	gate3 := make(chan struct{})
	srv := newServer(outcome{wait: gate, code: codes.Unavailable}, outcome{code: codes.Unavailable}, outcome{wait: gate3, code: codes.Unavailable})
	rec := newHedgeRecorder()
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Observer: rec, Backoff: noWait}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay, MaxHedges: 5}, WithNonFatalCodes(codes.Unavailable))
	res := goCall(client, "x")
	started(t, srv)
	hedgeAt(t, f, srv, hedgeDelay)
	rec.waitEnd(t)
	close(gate)
	if n := started(t, srv); n != 3 {
		t.Fatalf("attempt %d started as the retry", n)
	}
	if n := f.Pending(); n != 0 {
		t.Fatalf("%d timers pending during attempt 3 of 3, want no hedge timer", n)
	}
	close(gate3)
	r := result(t, res)
	if !errors.Is(r.err, retry.ErrAttemptsExhausted) || status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call error %v, want Unavailable after exhausted attempts", r.err)
	}
	_, prev, _, _ := srv.stats()
	if want := []string{"", "1", "2"}; !slices.Equal(prev, want) {
		t.Fatalf("grpc-previous-rpc-attempts %q, want %q", prev, want)
	}
}

// TestHedgePanicDoesNotLeak: an inner interceptor that panics in a hedge
// (in its own goroutine) or in the first copy while a hedge runs: the
// other copy is cancelled on the server and waited for, every breaker
// permit is returned, the panic reaches the caller, and no goroutine is
// left (goleak, in TestMain).
func TestHedgePanicDoesNotLeak(t *testing.T) {
	for _, c := range []struct {
		name   string
		panics int // the attempt that panics; the server sees the other as its first
	}{{"hedge panics", 2}, {"first copy panics", 1}} {
		t.Run(c.name, func(t *testing.T) {
			f := clocktest.NewFake()
			srv := newServer(outcome{block: true}, outcome{block: true})
			br := &countingBreaker{}
			p := &retry.Policy{MaxAttempts: 3, Clock: f, Breaker: br}
			gate := make(chan struct{})
			inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				n, _, _ := hedge.AttemptOf(ctx)
				if n == c.panics {
					if n == 1 {
						<-gate // panic once the hedge is in flight
					}
					panic("inner interceptor")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			client := hedgeClientWith(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, inner)
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				_, _ = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			}()
			if c.panics == 1 {
				f.BlockUntil(1)
				f.Advance(hedgeDelay)
				started(t, srv)
				close(gate)
			} else {
				started(t, srv)
				f.BlockUntil(1)
				f.Advance(hedgeDelay)
			}
			select {
			case v := <-done:
				if v == nil {
					t.Fatal("no panic reached the caller")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the call did not return")
			}
			if n := canceled(t, srv); n != 1 {
				t.Fatalf("server attempt %d cancelled, want its only one", n)
			}
			if allowed, done := br.counts(); allowed != 2 || done != 2 {
				t.Fatalf("breaker: %d permits, %d results, want 2 and 2", allowed, done)
			}
		})
	}
}

// TestHedgePushbackIsTheRetryWait: when every copy failed and one carried
// a positive pushback, the retry waits for the pushback (jittered up to
// 10%), not the Policy's backoff — read from the copy's error, as copies
// may fail at the same time.
func TestHedgePushbackIsTheRetryWait(t *testing.T) {
	f := clocktest.NewFake()
	srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"300"}})
	rec := newHedgeRecorder()
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Observer: rec, Backoff: backoff.Constant{Interval: time.Second}}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: time.Hour}, WithNonFatalCodes(codes.Unavailable))
	res := goCall(client, "x")
	var e retry.RetryScheduled
	select {
	case e = <-rec.scheduled:
	case <-time.After(20 * time.Second):
		t.Fatal("no retry scheduled")
	}
	if !e.Advised || e.Delay < 300*time.Millisecond || e.Delay > 330*time.Millisecond {
		t.Fatalf("retry scheduled %+v, want the advised 300ms..330ms", e)
	}
	f.BlockUntil(1)
	if got := f.Deadlines(); len(got) != 1 || got[0] != e.Delay {
		t.Fatalf("pending timers %v, want the retry wait %v alone", got, e.Delay)
	}
	f.Advance(e.Delay)
	if r := result(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	if n, _, _, _ := srv.stats(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestHedgeCallOptions: WithMaxAttempts(1) makes a call that is not
// hedged; WithPolicy runs the call, hedges included, under another Policy.
func TestHedgeCallOptions(t *testing.T) {
	t.Run("WithMaxAttempts(1)", func(t *testing.T) {
		f := clocktest.NewFake()
		gate := make(chan struct{})
		srv := newServer(outcome{wait: gate})
		p := &retry.Policy{MaxAttempts: 3, Clock: f}
		client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay})
		res := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, WithMaxAttempts(1))
			res <- err
		}()
		started(t, srv)
		if n := f.Pending(); n != 0 {
			t.Fatalf("%d timers pending for a call of one attempt, want no hedge timer", n)
		}
		close(gate)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("WithPolicy", func(t *testing.T) {
		f := clocktest.NewFake()
		srv := newServer(outcome{block: true}, outcome{})
		rec := newHedgeRecorder()
		other := &retry.Policy{MaxAttempts: 2, Clock: f, Observer: rec}
		client := hedgeClient(t, srv, &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 1}, Delay: hedgeDelay})
		res := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, WithPolicy(other))
			res <- err
		}()
		started(t, srv)
		hedgeAt(t, f, srv, hedgeDelay)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		canceled(t, srv)
		if _, won := rec.events(); !slices.Equal(won, []int{2}) {
			t.Fatalf("HedgeWon %v under the call's Policy, want [2]", won)
		}
	})
}

// TestHedgeLayerRule: under the default NestedOneLayer, a call made while
// serving an inbound call whose caller retries is not hedged (nor
// retried): the hedge delay passes with no second copy.
func TestHedgeLayerRule(t *testing.T) {
	f := clocktest.NewFake()
	gate := make(chan struct{})
	srv := newServer(outcome{wait: gate, code: codes.Unavailable})
	rec := newHedgeRecorder()
	p := &retry.Policy{MaxAttempts: 3, Clock: f, Observer: rec, Backoff: noWait}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, WithNonFatalCodes(codes.Unavailable))
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	res := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		res <- err
	}()
	started(t, srv)
	f.Advance(hedgeDelay) // a hedge would be due now (no timer: nothing fires)
	if n := len(rec.Starts()); n != 1 {
		t.Fatalf("%d attempts started, want 1: %+v", n, rec.Starts())
	}
	close(gate)
	if err := <-res; status.Code(err) != codes.Unavailable {
		t.Fatalf("call error %v", err)
	}
	if n, _, _, _ := srv.stats(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	if got := srv.announced(); !slices.Equal(got, []string{"1/1/-"}) {
		t.Fatalf("announced %q, want will-retry 1 (the caller above retries)", got)
	}
}

// TestHedgeCommittedCopyIsFatal: a copy whose server sent response
// headers before failing is committed, so even a non-fatal code ends the
// call, and the other copy is cancelled.
func TestHedgeCommittedCopyIsFatal(t *testing.T) {
	f := clocktest.NewFake()
	srv := newServer(outcome{block: true}, outcome{header: true, code: codes.Unavailable})
	p := &retry.Policy{MaxAttempts: 5, Clock: f, Backoff: noWait}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, Delay: hedgeDelay}, WithNonFatalCodes(codes.Unavailable))
	res := goCall(client, "x")
	started(t, srv)
	hedgeAt(t, f, srv, hedgeDelay)
	if r := result(t, res); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call error %v, want the committed copy's Unavailable", r.err)
	}
	if n := canceled(t, srv); n != 1 {
		t.Fatalf("attempt %d cancelled, want the first", n)
	}
	if n, _, _, _ := srv.stats(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestHedgeNonProtoReplyNotHedged: a reply that is not a proto.Message
// (another codec's) cannot be given to a second copy: the call is sent as
// the retry interceptor sends it, with no hedge timer.
func TestHedgeNonProtoReplyNotHedged(t *testing.T) {
	f := clocktest.NewFake()
	p := &retry.Policy{MaxAttempts: 3, Clock: f}
	ic := UnaryHedgingInterceptor(&hedge.Hedger{Policy: p, Delay: hedgeDelay}, WithIdempotentServices(testService))
	calls, pending := 0, -1
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		calls++
		pending = f.Pending()
		return nil
	}
	var reply struct{ Name string }
	if err := ic(context.Background(), unaryMethod, nil, &reply, nil, invoker); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || pending != 0 {
		t.Fatalf("%d invocations, %d timers pending during the call; want 1 and no hedge timer", calls, pending)
	}
	// The same call with a proto reply arms the hedge timer.
	if err := ic(context.Background(), unaryMethod, nil, new(testpb.SimpleResponse), nil, invoker); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Fatalf("%d timers pending during a hedged call, want the hedge timer", pending)
	}
}
