package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
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

// Sweep (every user callback under a panic test): the policy's own
// Classify, which the transport asks with a *StatusError, panics on a 503:
// the response being classified is closed, the breaker hears the attempt
// end as a panic (its permit released), and the panic goes on.
func TestPanicInPolicyClassifyReleasesResponse(t *testing.T) {
	type boom struct{}
	var closed atomic.Int32
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: closeSignal{io.NopCloser(strings.NewReader("down")), &closed}}, nil
	})
	br := &stubBreaker{}
	p := noWait(3)
	p.Breaker = br
	p.Classify = func(error) bool { panic(boom{}) }
	rt := httpretry.New(next, p)
	v := func() (v any) {
		defer func() { v = recover() }()
		rt.RoundTrip(get(t, "http://127.0.0.1:1/"))
		return nil
	}()
	if _, ok := v.(boom); !ok {
		t.Fatalf("recovered %v, want Classify's panic", v)
	}
	if closed.Load() != 1 {
		t.Errorf("%d response bodies closed, want 1", closed.Load())
	}
	if res := br.results(); len(res) != 1 || !errors.Is(res[0], retry.ErrPanicked) {
		t.Errorf("the breaker heard %v, want one panicked attempt", res)
	}
}

// refusingLimiter refuses every attempt (with errThrottled).
type refusingLimiter struct{}

func (refusingLimiter) Acquire(context.Context, bool) (func(error), error) { return nil, errThrottled }

// Sweep (cleanup on every path): a request refused before any attempt —
// by an open breaker, by the Limiter, or because the caller's context had
// ended — has its body closed exactly once, whichever way the body was
// to be sent (once, through GetBody, buffered, or streamed as too large to
// buffer), and nothing is sent.
func TestRefusedRequestClosesBodyOnce(t *testing.T) {
	type refusal struct {
		name   string
		policy func() *retry.Policy
		ctx    func() context.Context
	}
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	refusals := []refusal{
		{"open breaker", func() *retry.Policy { p := noWait(3); p.Breaker = &stubBreaker{open: true}; return p }, context.Background},
		{"limiter", func() *retry.Policy { p := noWait(3); p.Limiter = refusingLimiter{}; return p }, context.Background},
		{"context ended", func() *retry.Policy { return noWait(3) }, cancelled},
		{"context ended, with an observer", func() *retry.Policy { p := noWait(3); p.Observer = retry.NopObserver{}; return p }, cancelled},
	}
	bodies := []struct {
		name    string
		method  string
		getBody bool
		size    int
	}{
		{"POST sent once", http.MethodPost, false, 10},
		{"POST with GetBody", http.MethodPost, true, 10},
		{"PUT with GetBody", http.MethodPut, true, 10},
		{"PUT buffered", http.MethodPut, false, 10},
		{"PUT too large to buffer", http.MethodPut, false, httpretry.DefaultBodyLimit + 1},
	}
	for _, rf := range refusals {
		for _, b := range bodies {
			t.Run(rf.name+"/"+b.name, func(t *testing.T) {
				sent := 0
				next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sent++
					r.Body.Close()
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
				})
				body := &countingBody{Reader: strings.NewReader(strings.Repeat("x", b.size))}
				req, _ := http.NewRequestWithContext(rf.ctx(), b.method, "http://127.0.0.1:1/", nil)
				req.Body, req.ContentLength = body, int64(b.size)
				if b.getBody {
					req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
				}
				resp, err := httpretry.New(next, rf.policy()).RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("a refused request got %d", resp.StatusCode)
				}
				if sent != 0 {
					t.Errorf("sent %d times, want 0", sent)
				}
				if n := body.closes.Load(); n != 1 {
					t.Errorf("request body closed %d times, want 1", n)
				}
			})
		}
	}
}

// endPanics is an Observer whose AttemptEnd (or, with call set, CallEnd)
// panics.
type endPanics struct {
	retry.NopObserver
	v    any
	call bool
}

func (o endPanics) AttemptEnd(context.Context, retry.AttemptEnd) {
	if !o.call {
		panic(o.v)
	}
}

func (o endPanics) CallEnd(context.Context, retry.CallEnd) {
	if o.call {
		panic(o.v)
	}
}

// Sweep (callback panics; cleanup on every path): an Observer whose
// AttemptEnd or CallEnd panics, after the attempt's response came back —
// a success, a failure kept for a retry, a permanent failure, the last
// failure — leaves no response open: its body is closed once, and the
// panic goes on. Before the fix a success's body (and a permanent
// failure's, on CallEnd) stayed open.
func TestPanicInAttemptEndClosesResponse(t *testing.T) {
	type boom struct{}
	for _, c := range []struct {
		code int
		call bool
	}{{200, false}, {503, false}, {404, false}, {200, true}, {404, true}, {503, true}} {
		code := c.code
		name := "AttemptEnd/" + strconv.Itoa(code)
		if c.call {
			name = "CallEnd/" + strconv.Itoa(code)
		}
		t.Run(name, func(t *testing.T) {
			var opened, closed atomic.Int32
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				opened.Add(1)
				body := io.NopCloser(strings.NewReader(strings.Repeat("x", 64<<10)))
				return &http.Response{StatusCode: code, Header: http.Header{}, Body: closeSignal{body, &closed}}, nil
			})
			p := noWait(3)
			p.Observer = endPanics{v: boom{}, call: c.call}
			rt := httpretry.New(next, p)
			v := func() (v any) {
				defer func() { v = recover() }()
				rt.RoundTrip(get(t, "http://127.0.0.1:1/"))
				return nil
			}()
			if _, ok := v.(boom); !ok {
				t.Fatalf("recovered %v, want the Observer's panic", v)
			}
			if o, n := opened.Load(), closed.Load(); n != o {
				t.Errorf("%d responses, %d bodies closed; want each closed once", o, n)
			}
		})
	}
}
