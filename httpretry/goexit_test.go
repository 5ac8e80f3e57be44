package httpretry_test

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// roundTripGoexit runs rt.RoundTrip(req) in a goroutine of its own and
// reports whether it returned (false: it ended by runtime.Goexit) and what
// a panic, if any, carried.
func roundTripGoexit(rt http.RoundTripper, req *http.Request) (returned bool, panicked any) {
	type outcome struct {
		returned bool
		v        any
	}
	done := make(chan outcome)
	go func() {
		var o outcome
		defer func() {
			o.v = recover() // nil for runtime.Goexit
			done <- o
		}()
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		o.returned = true
	}()
	o := <-done
	return o.returned, o.v
}

// TestRoundTripGoexitReleasesAttempt: a runtime.Goexit in the next
// RoundTripper or in GetBody (as t.FailNow in a test's RoundTripper calls
// it) releases what a panic there releases: the breaker hears the attempt
// end as panicked (a half-open probe slot is not kept), the Observer hears
// the call end with ReasonPanic, the AttemptTimeout timer is stopped (the
// fake clock has none pending), and the response kept for the retry is
// closed. Each case runs with and without a Breaker (the Call path and the
// retry.Do path of the transport).
func TestRoundTripGoexitReleasesAttempt(t *testing.T) {
	for _, where := range []string{"next", "GetBody"} {
		for _, withBreaker := range []bool{false, true} {
			name := where
			if withBreaker {
				name += "/breaker"
			}
			t.Run(name, func(t *testing.T) {
				var closed atomic.Int32
				calls := 0
				next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					calls++
					if where == "next" {
						runtime.Goexit()
					}
					if r.Body != nil {
						io.Copy(io.Discard, r.Body)
						r.Body.Close()
					}
					body := io.NopCloser(strings.NewReader(strings.Repeat("x", 64<<10))) // longer than what is drained
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: closeSignal{body, &closed}}, nil
				})
				fc := clocktest.NewFake()
				p := &retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Clock: fc, AttemptTimeout: time.Hour}
				br := &stubBreaker{}
				rec := new(retrytest.Recorder)
				if withBreaker {
					p.Breaker, p.Observer = br, rec
				}
				req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:1/", strings.NewReader("doc"))
				req.GetBody = func() (io.ReadCloser, error) { runtime.Goexit(); return nil, nil }
				returned, v := roundTripGoexit(httpretry.New(next, p), req)
				if returned || v != nil {
					t.Fatalf("RoundTrip returned %v, panicked with %v; want it to end by runtime.Goexit", returned, v)
				}
				if n := fc.Pending(); n != 0 {
					t.Errorf("%d timers pending after the Goexit, want 0 (the attempt's timer stopped)", n)
				}
				if where == "GetBody" && closed.Load() != 1 {
					t.Errorf("%d of the kept responses' bodies closed, want 1", closed.Load())
				}
				if calls != 1 {
					t.Errorf("next RoundTripper called %d times, want 1", calls)
				}
				if withBreaker {
					// GetBody runs in the second attempt, after a 503.
					want := 1
					if where == "GetBody" {
						want = 2
					}
					if res := br.results(); len(res) != want || !errors.Is(res[want-1], retry.ErrPanicked) {
						t.Errorf("the breaker heard %v, want %d attempts, the last ended as panicked", res, want)
					}
					if calls := rec.Calls(); len(calls) != 1 || calls[0].Reason != retry.ReasonPanic {
						t.Errorf("call ends %+v, want one with ReasonPanic", calls)
					}
				}
			})
		}
	}
}

// goexitSource is a PolicySource whose Policy calls runtime.Goexit.
type goexitSource struct{}

func (goexitSource) Policy() *retry.Policy { runtime.Goexit(); return nil }

// TestRoundTripGoexitBeforeAttemptClosesBody: a runtime.Goexit in the
// policy source, before any attempt sent the request, closes the request
// body once, as the RoundTripper contract wants and as a panic there does.
func TestRoundTripGoexitBeforeAttemptClosesBody(t *testing.T) {
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Error("next RoundTripper called")
		return nil, errors.New("unreachable")
	})
	body := &countingBody{Reader: strings.NewReader("doc")}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", body)
	returned, v := roundTripGoexit(httpretry.New(next, goexitSource{}), req)
	if returned || v != nil {
		t.Fatalf("RoundTrip returned %v, panicked with %v; want it to end by runtime.Goexit", returned, v)
	}
	if n := body.closes.Load(); n != 1 {
		t.Fatalf("request body closed %d times, want 1", n)
	}
}
