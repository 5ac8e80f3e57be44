package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// Issue #18 item 5: a Retry-After longer than MaxRetryAfter stops the
// call: the response comes back at once, body intact and error nil, and
// the observer hears the call end with ReasonAdvice. Coming back at the
// cap would be sooner than the server asked.
func TestRetryAfterBeyondCapReturnsResponse(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		cases := []struct {
			name     string
			code     int
			value    string
			maxAfter time.Duration
		}{
			{"120s over the default 30s", 503, "120", 0},
			{"a day over the default", 429, "86400", 0},
			{"60s over a custom 10s", 429, "60", 10 * time.Second},
			// Sweep: a value beyond what a Duration holds is clamped, not
			// ignored — ignoring it retried after the 100 ms backoff the
			// server that asked for the longest wait.
			{"absurd 99999999999 clamped", 503, "99999999999", 0},
			{"beyond int64 clamped", 429, "99999999999999999999999999999", 0},
			{"a date in 9999 clamped", 503, "Fri, 31 Dec 9999 23:59:59 GMT", 0},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
					if hit == 1 {
						w.Header().Set("Retry-After", tc.value)
						w.WriteHeader(tc.code)
						io.WriteString(w, "come back later")
						return
					}
					io.WriteString(w, "too soon")
				})
				p, fc := fakePolicy(5)
				p.MaxRetryAfter = tc.maxAfter
				rec := new(retrytest.Recorder)
				p.Observer = rec
				rt := httpretry.New(srv.base(t), p)
				r := drive(t, fc, func() (*http.Response, error) { return rt.RoundTrip(get(t, srv.URL)) })
				if r.err != nil {
					t.Fatalf("err %v, want the %d response", r.err, tc.code)
				}
				if r.resp.StatusCode != tc.code || r.resp.Header.Get("Retry-After") != tc.value {
					t.Errorf("status %d Retry-After %q", r.resp.StatusCode, r.resp.Header.Get("Retry-After"))
				}
				if body := readAll(t, r.resp); body != "come back later" {
					t.Errorf("body %q", body)
				}
				if len(r.waits) != 0 || srv.hits.Load() != 1 {
					t.Errorf("waits %v, %d requests: want no wait and 1 request", r.waits, srv.hits.Load())
				}
				calls := rec.Calls()
				if len(calls) != 1 || calls[0].Reason != retry.ReasonAdvice || !errors.Is(calls[0].Err, retry.ErrAdviceExceedsCap) {
					t.Errorf("call ends %+v, want one with ReasonAdvice and ErrAdviceExceedsCap", calls)
				}
			})
		}
	})
}

// Issue #18 item 6: a caller who cancels during the backoff wait gets the
// context's error, naming the last status, not the previous 503 with a nil
// error; the held response's body is closed.
func TestCancelDuringWaitReturnsContextError(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		for _, size := range []int{10, 64 << 10} { // drained at once; holding its connection
			body := strings.Repeat("b", size)
			srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
				w.WriteHeader(503)
				io.WriteString(w, body)
			})
			base := srv.base(t)
			var opened, closed atomic.Int32
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := base.RoundTrip(r)
				if err == nil {
					opened.Add(1)
					resp.Body = closeSignal{resp.Body, &closed}
				}
				return resp, err
			})
			p, fc := fakePolicy(3)
			rt := httpretry.New(next, p)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			done := make(chan result, 1)
			go func() {
				resp, err := rt.RoundTrip(req)
				done <- result{resp: resp, err: err}
			}()
			fc.BlockUntil(1) // waiting before the second attempt
			cancel()
			r := <-done
			if r.resp != nil {
				readAll(t, r.resp)
				t.Fatalf("size %d: got the %d response, want the context's error", size, r.resp.StatusCode)
			}
			if !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), "503") {
				t.Errorf("size %d: err %v, want context.Canceled naming the last status 503", size, r.err)
			}
			if opened.Load() != 1 || closed.Load() != 1 {
				t.Errorf("size %d: %d responses, %d bodies closed; want 1 and 1", size, opened.Load(), closed.Load())
			}
			if srv.hits.Load() != 1 || fc.Pending() != 0 {
				t.Errorf("size %d: %d requests, %d timers pending; want 1 and 0", size, srv.hits.Load(), fc.Pending())
			}
		}
	})
}

type closeSignal struct {
	io.ReadCloser
	n *atomic.Int32
}

func (c closeSignal) Close() error {
	c.n.Add(1)
	return c.ReadCloser.Close()
}

// Issue #17 item 1: a panic in user code the transport runs during an
// attempt (a classifier, the wrapped RoundTripper, a GetBody) releases the
// half-open breaker's probe permit and the concurrency budget's slots,
// reports the call as ended by a panic, and goes on.
func TestPanicReleasesProbeAndBudget(t *testing.T) {
	srv := newServer(t, statuses(503, 200))
	type boom struct{}
	cases := []struct {
		name string
		// halfOpen: the panicking attempt is the breaker's probe.
		halfOpen bool
		new      func(base http.RoundTripper) (http.RoundTripper, *http.Request, []httpretry.Option)
	}{
		{"classifier", true, func(base http.RoundTripper) (http.RoundTripper, *http.Request, []httpretry.Option) {
			return base, get(t, srv.URL), []httpretry.Option{httpretry.WithClassifier(func(*http.Response, error) bool { panic(boom{}) })}
		}},
		{"next RoundTripper", true, func(http.RoundTripper) (http.RoundTripper, *http.Request, []httpretry.Option) {
			return roundTripFunc(func(*http.Request) (*http.Response, error) { panic(boom{}) }), get(t, srv.URL), nil
		}},
		{"GetBody on a retry", false, func(base http.RoundTripper) (http.RoundTripper, *http.Request, []httpretry.Option) {
			req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("doc"))
			req.GetBody = func() (io.ReadCloser, error) { panic(boom{}) }
			return base, req, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.hits.Store(0)
			p, fc := fakePolicy(3)
			p.Backoff = zeroBackoff{}
			br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: fc})
			if tc.halfOpen {
				done, err := br.Allow()
				if err != nil {
					t.Fatal(err)
				}
				done(errors.New("trip"))
				fc.Advance(time.Second)
				if br.State() != breaker.HalfOpen {
					t.Fatalf("breaker %v, want half-open", br.State())
				}
			}
			bud := budget.NewConcurrency(budget.ConcurrencyConfig{})
			rec := new(retrytest.Recorder)
			p.Budget, p.Observer = bud, rec
			if tc.halfOpen {
				p.Breaker = br
			}
			next, req, opts := tc.new(newBase(t))
			rt := httpretry.New(next, p, opts...)

			v := func() (v any) {
				defer func() { v = recover() }()
				resp, err := rt.RoundTrip(req)
				t.Errorf("RoundTrip returned %v, %v; want a panic", resp, err)
				return nil
			}()
			if _, ok := v.(boom); !ok {
				t.Fatalf("recovered %v, want the user code's panic", v)
			}
			if tc.halfOpen {
				if err := br.Ready(); !errors.Is(err, breaker.ErrOpen) || err == breaker.ErrTooManyProbes {
					t.Errorf("breaker after the panicking probe: %v, want it open again (the probe released)", err)
				}
			}
			if reqs, retries := bud.Active(); reqs != 0 || retries != 0 {
				t.Errorf("budget active %d requests %d retries, want none left", reqs, retries)
			}
			calls := rec.Calls()
			if len(calls) != 1 || calls[0].Reason != retry.ReasonPanic {
				t.Errorf("call ends %+v, want one with ReasonPanic (%s)", calls, rec)
			}
		})
	}
}

// With no breaker, budget or observer a panic still releases what the
// attempt held: the previous response, kept for the retry, is closed when
// GetBody panics.
func TestPanicReleasesHeldResponse(t *testing.T) {
	type boom struct{}
	var closed atomic.Int32
	calls := 0
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		body := io.NopCloser(strings.NewReader(strings.Repeat("x", 64<<10))) // longer than what is drained
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: closeSignal{body, &closed}}, nil
	})
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:1/", strings.NewReader("doc"))
	req.GetBody = func() (io.ReadCloser, error) { panic(boom{}) }
	rt := httpretry.New(next, noWait(3))
	v := func() (v any) {
		defer func() { v = recover() }()
		rt.RoundTrip(req)
		return nil
	}()
	if _, ok := v.(boom); !ok {
		t.Fatalf("recovered %v, want GetBody's panic", v)
	}
	if calls != 1 || closed.Load() != 1 {
		t.Errorf("%d calls, %d bodies closed; want 1 and 1", calls, closed.Load())
	}
}
