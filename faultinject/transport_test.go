package faultinject_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/retry"
)

// countingRT answers 200 "upstream" without a network, counting calls.
type countingRT struct{ calls atomic.Int64 }

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("upstream")), Request: req}, nil
}

// trackedBody records whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// rtResult is what a RoundTrip returned.
type rtResult struct {
	resp *http.Response
	err  error
}

// goRoundTrip runs rt.RoundTrip(req) in its own goroutine and delivers
// what it returned, the response's body closed.
func goRoundTrip(rt http.RoundTripper, req *http.Request) <-chan rtResult {
	ch := make(chan rtResult, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		ch <- rtResult{resp, err}
	}()
	return ch
}

func newReq(t *testing.T, ctx context.Context, body io.ReadCloser) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/x", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestTransportPassesToNextServer(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "real") }))
	inner := &http.Transport{}
	t.Cleanup(inner.CloseIdleConnections)
	in := faultinject.New(faultinject.Config{})
	c := &http.Client{Transport: in.Transport(inner)}
	r := get(t, c, srv.URL)
	if r.err != nil || r.body != "real" {
		t.Fatalf("got %+v", r)
	}
	if s := in.Snapshot(); s.Passed != 1 || s.InFlight != 0 {
		t.Fatalf("counters %+v", s)
	}
}

func TestTransportAbortMakesUpAResponse(t *testing.T) {
	next := &countingRT{}
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{
		Abort: faultinject.AbortRule{Percent: 100, Status: 500, RetryAfter: 3 * time.Second},
	}})
	body := &trackedBody{Reader: strings.NewReader("payload")}
	req := newReq(t, context.Background(), body)
	resp, err := in.Transport(next).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 500 || resp.Status != "500 Internal Server Error" || resp.Request != req ||
		resp.Header.Get("Retry-After") != "3" || resp.Header.Get(faultinject.HeaderFault) != "abort" ||
		resp.ContentLength != int64(len(b)) || !strings.Contains(string(b), "injected abort") {
		t.Fatalf("response %+v, body %q", resp, b)
	}
	if next.calls.Load() != 0 || !body.closed.Load() {
		t.Fatalf("next called %d times, request body closed %v", next.calls.Load(), body.closed.Load())
	}
}

func TestTransportResetError(t *testing.T) {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{ResetPercent: 100}})
	body := &trackedBody{Reader: strings.NewReader("x")}
	_, err := in.Transport(&countingRT{}).RoundTrip(newReq(t, context.Background(), body))
	var ne net.Error
	if !errors.Is(err, syscall.ECONNRESET) || !errors.Is(err, faultinject.ErrInjected) || !errors.As(err, &ne) {
		t.Fatalf("err = %v, want ECONNRESET, ErrInjected and a net.Error", err)
	}
	if !retry.IsTransientNetError(err) || !retry.DefaultClassifier(err) {
		t.Fatal("an injected reset is not classified as transient")
	}
	if !strings.HasPrefix(err.Error(), "faultinject: ") || !body.closed.Load() {
		t.Fatalf("err %q, body closed %v", err, body.closed.Load())
	}
}

func TestTransportHangReturnsTheCallersCause(t *testing.T) {
	ev := newEvents()
	in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{HangPercent: 100}})
	cause := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	res := goRoundTrip(in.Transport(&countingRT{}), newReq(t, ctx, nil))
	ev.waitFor(t, faultinject.Hang)
	if s := in.Snapshot(); s.Hanging != 1 {
		t.Fatalf("Hanging = %d while hanging", s.Hanging)
	}
	cancel(cause)
	if err := recv(t, res).err; !errors.Is(err, cause) {
		t.Fatalf("err = %v, want the context's cause", err)
	}
	if s := in.Snapshot(); s.Hanging != 0 || s.Hangs != 1 {
		t.Fatalf("counters %+v", s)
	}
}

func TestTransportHangEndsOnClose(t *testing.T) {
	ev := newEvents()
	in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{HangPercent: 100}})
	res := goRoundTrip(in.Transport(&countingRT{}), newReq(t, context.Background(), nil))
	ev.waitFor(t, faultinject.Hang)
	in.Close()
	if err := recv(t, res).err; !errors.Is(err, faultinject.ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestTransportLatencyAndOutageOnFakeClock(t *testing.T) {
	clk := clocktest.NewFake()
	next := &countingRT{}
	in := faultinject.New(faultinject.Config{Clock: clk, Rules: faultinject.Rules{
		Latency: 250 * time.Millisecond,
		Outages: []faultinject.Window{{Start: time.Second, End: 2 * time.Second, Status: 504}},
	}})
	rt := in.Transport(next)
	ch := goRoundTrip(rt, newReq(t, context.Background(), nil))
	clk.BlockUntil(1)
	if d := clk.Deadlines(); len(d) != 1 || d[0] != 250*time.Millisecond {
		t.Fatalf("pending waits %v, want [250ms]", d)
	}
	clk.Advance(250 * time.Millisecond)
	if o := recv(t, ch); o.err != nil || o.resp.StatusCode != 200 {
		t.Fatalf("got %+v", o)
	}
	// Inside the outage: no latency, no call, the window's status.
	clk.Set(clocktest.Epoch.Add(1500 * time.Millisecond))
	resp, err := rt.RoundTrip(newReq(t, context.Background(), nil))
	if err != nil || resp.StatusCode != 504 || resp.Header.Get(faultinject.HeaderFault) != "outage" {
		t.Fatalf("in the outage: %v, %v", resp, err)
	}
	if next.calls.Load() != 1 || clk.Pending() != 0 {
		t.Fatalf("next called %d times, %d waits pending", next.calls.Load(), clk.Pending())
	}
}

func TestTransportLimitCountsUntilRoundTripReturns(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		entered <- struct{}{}
		<-release
		return (&countingRT{}).RoundTrip(req)
	})
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1}}})
	rt := in.Transport(next)
	res := goRoundTrip(rt, newReq(t, context.Background(), nil))
	recv(t, entered)
	resp, err := rt.RoundTrip(newReq(t, context.Background(), nil))
	if err != nil || resp.StatusCode != 503 || resp.Header.Get(faultinject.HeaderFault) != "reject" {
		t.Fatalf("second request: %v, %v; want a rejection", resp, err)
	}
	close(release)
	if err := recv(t, res).err; err != nil {
		t.Fatal(err)
	}
	if s := in.Snapshot(); s.InFlight != 0 || s.Rejected != 1 || s.Passed != 1 {
		t.Fatalf("counters %+v", s)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
