package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func outputRequest(n int) *testpb.StreamingOutputCallRequest {
	req := &testpb.StreamingOutputCallRequest{Payload: payload("req")}
	for range n {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: 1})
	}
	return req
}

// readAll receives until the stream ends and returns the bodies received.
func readAll(stream interface {
	Recv() (*testpb.StreamingOutputCallResponse, error)
}) ([]string, error) {
	var got []string
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(resp.GetPayload().GetBody()))
	}
}

// TestServerStreamRetriedBeforeFirstMessage: a stream that fails before its
// first response is retried after the backoff (on the fake clock) and the
// caller sees only the successful attempt's messages.
func TestServerStreamRetriedBeforeFirstMessage(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Aborted})
	f := clocktest.NewFake()
	rec := newRecorder()
	p := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{Interval: 250 * time.Millisecond}, Clock: f, Observer: rec}
	client := dialRetry(t, serve(t, srv), p)

	var got []string
	err := driveWaits(t, f, func() error {
		stream, err := client.StreamingOutputCall(context.Background(), outputRequest(3))
		if err != nil {
			return err
		}
		got, err = readAll(stream)
		return err
	}, func(i int, d time.Duration) {
		if d != 250*time.Millisecond {
			t.Errorf("wait %d: %v", i, d)
		}
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"\x00", "\x01", "\x02"}; !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	attempts, prev, _, received := srv.stats()
	if attempts != 3 || !slices.Equal(prev, []string{"", "1", "2"}) {
		t.Fatalf("%d attempts, previous %q", attempts, prev)
	}
	for i, r := range received {
		if !slices.Equal(r, []string{"req"}) {
			t.Fatalf("attempt %d got request %q: the request was not replayed", i+1, r)
		}
	}
	if got, want := rec.codes(), []codes.Code{codes.Unavailable, codes.Aborted, codes.OK}; !slices.Equal(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonSuccess || c.Attempts != 3 {
		t.Fatalf("CallEnd %+v", c)
	}
}

// TestServerStreamNotRetriedAfterFirstMessage: once a response message has
// arrived, the stream's failure is final.
func TestServerStreamNotRetriedAfterFirstMessage(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable, before: 1})
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 4, Backoff: noWait, Observer: rec})
	stream, err := client.StreamingOutputCall(context.Background(), outputRequest(3))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(stream)
	if len(got) != 1 || status.Code(err) != codes.Unavailable {
		t.Fatalf("received %q, err %v", got, err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("%d attempts", attempts)
	}
	if got := rec.outcomes(); !slices.Equal(got, []retry.Outcome{retry.OutcomePermanent}) {
		t.Fatalf("outcomes %v", got)
	}
	if stream.Trailer() == nil {
		t.Fatal("no trailer after the stream ended")
	}
}

func inputMessages(n, size int) []*testpb.StreamingInputCallRequest {
	out := make([]*testpb.StreamingInputCallRequest, n)
	for i := range out {
		body := fmt.Sprintf("m%d-", i)
		body += strings.Repeat("x", size-len(body))
		out[i] = &testpb.StreamingInputCallRequest{Payload: payload(body)}
	}
	return out
}

// TestClientStreamReplay: the messages sent on a failed attempt are sent
// again, in order, followed by CloseSend, on the next one — whether the
// server failed after reading them all or in the middle.
func TestClientStreamReplay(t *testing.T) {
	for _, recv := range []int{0, 2} {
		t.Run(fmt.Sprintf("server fails after %d", recv), func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable, recv: recv})
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait})
			stream, err := client.StreamingInputCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			msgs := inputMessages(5, 10)
			var want []string
			for _, m := range msgs {
				if err := stream.Send(m); err != nil {
					t.Fatalf("Send: %v", err)
				}
				want = append(want, string(m.GetPayload().GetBody()))
			}
			resp, err := stream.CloseAndRecv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAggregatedPayloadSize() != 50 {
				t.Fatalf("aggregated %d, want 50", resp.GetAggregatedPayloadSize())
			}
			attempts, prev, _, received := srv.stats()
			if attempts != 2 || prev[1] != "1" {
				t.Fatalf("%d attempts, previous %q", attempts, prev)
			}
			if !slices.Equal(received[1], want) {
				t.Fatalf("replayed %q, want %q", received[1], want)
			}
			if recv > 0 && len(received[0]) != recv {
				t.Fatalf("first attempt read %q", received[0])
			}
		})
	}
}

// TestClientStreamCommittedPastLimit: messages past MaxReplayBytes commit
// the stream, and its failure is final.
func TestClientStreamCommittedPastLimit(t *testing.T) {
	for _, c := range []struct {
		limit, n, size int
		want           int
	}{
		{limit: 50, n: 5, size: 10, want: 1},      // 5 × 14 bytes (proto.Size) > 50
		{limit: 50, n: 2, size: 10, want: 2},      // 28 bytes fit
		{limit: -1, n: 1, size: 10, want: 1},      // nothing is kept
		{limit: 0, n: 5, size: 10, want: 2},       // the default 256 KiB
		{limit: 0, n: 5, size: 60 << 10, want: 1}, // 300 KiB > 256 KiB
		{limit: 0, n: 4, size: 60 << 10, want: 2}, // 240 KiB fit
	} {
		srv := newServer(outcome{code: codes.Unavailable})
		client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait}, WithMaxReplayBytes(c.limit))
		stream, err := client.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range inputMessages(c.n, c.size) {
			if err := stream.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		_, err = stream.CloseAndRecv()
		attempts, _, _, _ := srv.stats()
		if attempts != c.want || (c.want == 1) != (status.Code(err) == codes.Unavailable) {
			t.Fatalf("limit %d, %d messages: %d attempts (err %v), want %d", c.limit, c.n, attempts, err, c.want)
		}
	}
}

// TestBidiStreamReplay: with a sender and a receiver goroutine, as gRPC
// allows, a bidirectional stream that fails before any response is
// replayed and then echoes every message exactly once.
func TestBidiStreamReplay(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable, recv: 3})
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec})
	stream, err := client.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: payload(fmt.Sprint(i))}); err != nil {
				t.Errorf("Send %d: %v", i, err)
				return
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Errorf("CloseSend: %v", err)
		}
	}()
	got, err := readAll(stream)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("echoed %q, want %q", got, want)
	}
	if attempts, _, _, received := srv.stats(); attempts != 2 || !slices.Equal(received[1], want) {
		t.Fatalf("%d attempts; the second received %q", attempts, received[len(received)-1])
	}
	if got := rec.codes(); !slices.Equal(got, []codes.Code{codes.Unavailable, codes.OK}) {
		t.Fatalf("codes %v", got)
	}
}

// TestStreamCommittedOnHeaders (issue 18 item 7): a stream whose server
// sent response headers before failing is committed (gRFC A6), whether or
// not the caller read them; a Trailers-Only failure is retried.
func TestStreamCommittedOnHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		o    outcome
		look bool // the caller reads the headers before receiving
		want int
	}{
		{"Trailers-Only", outcome{code: codes.Unavailable}, false, 2},
		{"Trailers-Only, Header read", outcome{code: codes.Unavailable}, true, 2},
		{"SendHeader, nothing read", outcome{code: codes.Unavailable, header: true}, false, 1},
		{"SendHeader, Header read", outcome{code: codes.Unavailable, header: true}, true, 1},
		{"SetHeader, nothing read", outcome{code: codes.Unavailable, set: true}, false, 1},
	} {
		for _, method := range []string{"server stream", "bidi"} {
			t.Run(c.name+"/"+method, func(t *testing.T) {
				srv := newServer(c.o)
				rec := newRecorder()
				client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec})
				var stream interface {
					Recv() (*testpb.StreamingOutputCallResponse, error)
					Header() (metadata.MD, error)
				}
				if method == "bidi" {
					s, err := client.FullDuplexCall(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if err := s.CloseSend(); err != nil {
						t.Fatal(err)
					}
					stream = s
				} else {
					s, err := client.StreamingOutputCall(context.Background(), outputRequest(1))
					if err != nil {
						t.Fatal(err)
					}
					stream = s
				}
				if c.look {
					md, err := stream.Header()
					if c.o.header && (err != nil || md.Get("attempt")[0] != "1") {
						t.Errorf("Header: %v, %v", md, err)
					}
				}
				got, err := readAll(stream)
				attempts, _, _, _ := srv.stats()
				if attempts != c.want {
					t.Fatalf("%d attempts (err %v), want %d", attempts, err, c.want)
				}
				if c.want == 1 {
					if status.Code(err) != codes.Unavailable {
						t.Fatalf("err = %v, want the attempt's Unavailable", err)
					}
					if o := rec.outcomes(); !slices.Equal(o, []retry.Outcome{retry.OutcomePermanent}) {
						t.Fatalf("outcomes %v", o)
					}
					var ae *AttemptError
					if !errors.As(err, &ae) || !ae.Committed {
						t.Fatalf("AttemptError %+v does not say it was committed", ae)
					}
				} else if err != nil || (method != "bidi" && len(got) != 1) {
					t.Fatalf("received %q, err %v", got, err)
				}
			})
		}
	}
}

// TestStreamContextDoesNotCommit (issue 18 item 9): middleware that reads
// the stream's Context, before and while the stream is retried, does not
// turn retries off; the context carries the caller's values, ends with the
// call and then reads the committed attempt's values (its peer).
func TestStreamContextDoesNotCommit(t *testing.T) {
	type key struct{}
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait})
	ctx := context.WithValue(context.Background(), key{}, "caller")
	stream, err := client.StreamingOutputCall(ctx, outputRequest(2))
	if err != nil {
		t.Fatal(err)
	}
	sctx := stream.Context() // as a logging interceptor would
	if sctx.Value(key{}) != "caller" || sctx.Err() != nil {
		t.Fatalf("Context: value %v, err %v", sctx.Value(key{}), sctx.Err())
	}
	got, err := readAll(stream)
	if err != nil || len(got) != 2 {
		t.Fatalf("received %q, err %v: reading Context turned retries off", got, err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 3 {
		t.Fatalf("%d attempts, want 3", attempts)
	}
	if stream.Context() != sctx {
		t.Fatal("Context changed between calls")
	}
	select {
	case <-sctx.Done():
	default:
		t.Fatal("the stream's context is not done after the call ended")
	}
	if sctx.Value(key{}) != "caller" {
		t.Fatal("the caller's value is gone")
	}
	if p, ok := peer.FromContext(sctx); !ok || p.Addr == nil {
		t.Fatalf("no peer in the ended stream's context: %v", p)
	}
}

// TestStreamBudgetBreakerObserver: stream attempts go through the breaker
// and the budget like unary ones, and the Observer sees each with its code.
func TestStreamBudgetBreakerObserver(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
	br := &countingBreaker{}
	b := &limitBudget{left: 1}
	rec := newRecorder()
	p := &retry.Policy{MaxAttempts: 5, Backoff: noWait, Breaker: br, Budget: b, Observer: rec}
	client := dialRetry(t, serve(t, srv), p)
	stream, err := client.StreamingOutputCall(context.Background(), outputRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(stream)
	if !errors.Is(err, retry.ErrBudgetExhausted) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if allowed, done := br.counts(); allowed != 2 || done != 2 {
		t.Fatalf("breaker: %d allowed, %d done", allowed, done)
	}
	if !slices.Equal(b.records, []bool{false, true}) || b.withdraw != 2 {
		t.Fatalf("budget: records %v, %d withdrawals", b.records, b.withdraw)
	}
	if got := rec.codes(); !slices.Equal(got, []codes.Code{codes.Unavailable, codes.Unavailable}) {
		t.Fatalf("codes %v", got)
	}
	if c := rec.lastCall(t); c.Reason != retry.ReasonBudget || c.Attempts != 2 {
		t.Fatalf("CallEnd %+v", c)
	}

	br.mu.Lock()
	br.refuse = errTestOpen
	br.mu.Unlock()
	if _, err := client.StreamingOutputCall(context.Background(), outputRequest(1)); !errors.Is(err, errTestOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("open breaker: %v", err)
	}
}
