package httpretry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// panicSource is a retry.PolicySource whose Policy panics.
type panicSource struct{ v any }

func (s panicSource) Policy() *retry.Policy { panic(s.v) }

// startPanics is an Observer whose AttemptStart panics.
type startPanics struct {
	retry.NopObserver
	v any
}

func (o startPanics) AttemptStart(context.Context, retry.AttemptStart) context.Context { panic(o.v) }

// panicLimiter is a retry.Limiter whose Acquire panics.
type panicLimiter struct{ v any }

func (l panicLimiter) Acquire(context.Context, bool) (func(error), error) { panic(l.v) }

// panicReader is a request body whose Read panics.
type panicReader struct{ v any }

func (r panicReader) Read([]byte) (int, error) { panic(r.v) }

// Issue #32 item 9, and the callbacks that run before the first attempt
// hands the body to the next RoundTripper: a panic in any of them (the
// WithRetryable rule, the policy source, the body's own Read while it is
// buffered, the Observer's AttemptStart, the Limiter) must still close
// the request body, as the RoundTripper contract requires, and the panic
// goes on. Before the fix the WithRetryable panic, the first, left the
// body open.
func TestPanicBeforeFirstAttemptClosesRequestBody(t *testing.T) {
	type boom struct{}
	var sent atomic.Int32
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		if r.Body != nil {
			r.Body.Close()
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	post := func(body io.Reader) (*http.Request, *countingBody) {
		b := &countingBody{Reader: body}
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", nil)
		req.Body = b
		return req, b
	}
	put := func(body io.Reader) (*http.Request, *countingBody) {
		req, b := post(body)
		req.Method = http.MethodPut
		return req, b
	}
	for _, c := range []struct {
		name string
		req  func(io.Reader) (*http.Request, *countingBody)
		body io.Reader
		src  retry.PolicySource
		opts []httpretry.Option
	}{
		{"WithRetryable", post, strings.NewReader("charge"), noWait(3),
			[]httpretry.Option{httpretry.WithRetryable(func(*http.Request) bool { panic(boom{}) })}},
		{"policy source", post, strings.NewReader("charge"), panicSource{boom{}}, nil},
		{"body Read while buffered", put, panicReader{boom{}}, noWait(3), nil},
		{"Observer AttemptStart, body sent once", post, strings.NewReader("charge"),
			&retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Observer: startPanics{v: boom{}}}, nil},
		{"Observer AttemptStart, body too large to buffer", put, strings.NewReader("doc"),
			&retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Observer: startPanics{v: boom{}}},
			[]httpretry.Option{httpretry.WithBodyLimit(1)}},
		{"Limiter", post, strings.NewReader("charge"),
			&retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Limiter: panicLimiter{boom{}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent.Store(0)
			req, body := c.req(c.body)
			rt := httpretry.New(next, c.src, c.opts...)
			v := func() (v any) {
				defer func() { v = recover() }()
				resp, err := rt.RoundTrip(req)
				t.Errorf("RoundTrip returned %v, %v; want a panic", resp, err)
				return nil
			}()
			if _, ok := v.(boom); !ok {
				t.Fatalf("recovered %v, want the callback's panic", v)
			}
			if sent.Load() != 0 {
				t.Fatalf("the request was sent %d times", sent.Load())
			}
			if n := body.closes.Load(); n != 1 {
				t.Errorf("request body closed %d times, want 1", n)
			}
		})
	}
}

// withdrawPanics is a retry.Budget whose Withdraw, asked before a retry,
// panics.
type withdrawPanics struct{ v any }

func (withdrawPanics) Record(bool, error)    {}
func (b withdrawPanics) Withdraw(error) bool { panic(b.v) }

// A panic between attempts (here the Budget's Withdraw, asked before the
// retry's wait) releases the response kept for the retry: its body is
// closed, and the panic goes on.
func TestPanicBetweenAttemptsClosesHeldResponse(t *testing.T) {
	type boom struct{}
	var closed atomic.Int32
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body := io.NopCloser(strings.NewReader(strings.Repeat("x", 64<<10))) // longer than what is drained
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: closeSignal{body, &closed}}, nil
	})
	p := noWait(3)
	p.Budget = withdrawPanics{boom{}}
	rt := httpretry.New(next, p)
	v := func() (v any) {
		defer func() { v = recover() }()
		rt.RoundTrip(get(t, "http://127.0.0.1:1/"))
		return nil
	}()
	if _, ok := v.(boom); !ok {
		t.Fatalf("recovered %v, want Withdraw's panic", v)
	}
	if closed.Load() != 1 {
		t.Errorf("%d response bodies closed, want 1", closed.Load())
	}
}
