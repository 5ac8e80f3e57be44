package hedge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

type closeBody struct {
	io.Reader
	closed int
}

func (b *closeBody) Close() error { b.closed++; return nil }

type refusingBreaker struct{}

var errOpen = errors.New("test: breaker open")

func (refusingBreaker) Allow() (func(error), error) { return nil, errOpen }
func (refusingBreaker) Ready() error                { return errOpen }

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Transport closes the body of a request it never sends (refused by the
// breaker, or its context already ended), as the RoundTripper contract
// asks: a POST sent once, and a hedgeable PUT.
func TestTransportClosesBodyOfUnsentRequest(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		breaker      retry.Breaker
		cancelled    bool
	}{
		{"POST/breaker", http.MethodPost, refusingBreaker{}, false},
		{"POST/context", http.MethodPost, nil, true},
		{"PUT/breaker", http.MethodPut, refusingBreaker{}, false},
		{"PUT/context", http.MethodPut, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := 0
			tr := &hedge.Transport{
				Next: rtFunc(func(r *http.Request) (*http.Response, error) {
					sent++
					return nil, errors.New("test: sent")
				}),
				Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clocktest.NewFake(), Breaker: tc.breaker}},
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			body := &closeBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequestWithContext(ctx, tc.method, "http://example.invalid/", body)
			if tc.method == http.MethodPut {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
			}
			resp, err := tr.RoundTrip(req)
			if err == nil || resp != nil {
				t.Fatalf("RoundTrip = %v, %v; want an error", resp, err)
			}
			if sent != 0 {
				t.Fatalf("sent %d times", sent)
			}
			if body.closed != 1 {
				t.Fatalf("the request body was closed %d times, want 1", body.closed)
			}
		})
	}
}

// A Retry-After too large for a time.Duration is clamped, not ignored:
// it is beyond MaxRetryAfter, so the call stops instead of retrying after
// its backoff (the server asking for the longest wait must not get the
// shortest).
func TestTransportHugeRetryAfterClamped(t *testing.T) {
	for _, v := range []string{"99999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		t.Run(v, func(t *testing.T) {
			sent := make(chan struct{}, 8)
			tr := &hedge.Transport{
				Next: rtFunc(func(r *http.Request) (*http.Response, error) {
					sent <- struct{}{}
					h := http.Header{}
					h.Set("Retry-After", v)
					return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h, Body: http.NoBody, Request: r}, nil
				}),
				Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clocktest.NewFake(), MaxAttempts: 3}},
			}
			req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
			type rt struct {
				resp *http.Response
				err  error
			}
			out := make(chan rt, 1)
			go func() {
				resp, err := tr.RoundTrip(req)
				out <- rt{resp, err}
			}()
			select {
			case r := <-out:
				if r.err != nil || r.resp == nil || r.resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("RoundTrip = %v, %v; want the 503", r.resp, r.err)
				}
				r.resp.Body.Close()
			case <-time.After(10 * time.Second):
				t.Fatal("RoundTrip did not return: the advice was ignored and a retry waits for its backoff")
			}
			if n := len(sent); n != 1 {
				t.Fatalf("sent %d times, want 1", n)
			}
		})
	}
}
