package httpretry_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Issue #25, papercut 4: when the budget refuses the retry of a 503, the
// caller gets the 503 with a nil error (the RoundTripper contract), and
// learns from Result why the call gave up, after how many attempts, and
// the *retry.Error, whose errors.Is finds ErrBudgetExhausted. Through an
// http.Client with a Timeout (which wraps the body) and after the body was
// read and closed.
func TestResultBudgetRefusal(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		srv := newModeServer(t, m, statuses(503))
		b := &refusingBudget{}
		p := noWait(4)
		p.Budget = b
		client := &http.Client{Transport: httpretry.New(srv.base(t), p), Timeout: 10 * time.Second}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("Get: %v, want the 503 with a nil error", err)
		}
		if resp.StatusCode != 503 {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
		if body := readAll(t, resp); body != "Service Unavailable body" {
			t.Errorf("body %q, want the 503's body intact", body)
		}
		o, ok := httpretry.Result(resp)
		if !ok {
			t.Fatal("Result: no record on a response the budget stopped")
		}
		if o.Reason != retry.ReasonBudget || o.Attempts != 1 {
			t.Errorf("Result = %v after %d attempts, want budget after 1", o.Reason, o.Attempts)
		}
		err = o.Err
		if !errors.Is(err, retry.ErrBudgetExhausted) {
			t.Errorf("errors.Is(%v, ErrBudgetExhausted) = false", err)
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 {
			t.Errorf("errors.As(*retry.Error) = %v, %+v", errors.As(err, &re), re)
		}
		var se *httpretry.StatusError
		if !errors.As(err, &se) || se.StatusCode != 503 {
			t.Errorf("the last attempt's *StatusError is not found in %v", err)
		}
		if resp.Request == nil || resp.Request.URL.String() != srv.URL {
			t.Errorf("resp.Request = %+v, want the caller's request", resp.Request)
		}
		if got := srv.hits.Load(); got != 1 {
			t.Errorf("%d requests reached the server, want 1", got)
		}
	})
}

// Every reason the policy can stop on a response reaches the caller.
func TestResultReasons(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		t.Run("attempts", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(503))
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonAttempts || o.Attempts != 3 || !errors.Is(o.Err, retry.ErrAttemptsExhausted) {
				t.Errorf("Result = %+v, %v; want attempts after 3", o, ok)
			}
		})
		t.Run("breaker", func(t *testing.T) {
			br := &stubBreaker{}
			srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
				br.mu.Lock()
				br.open = true // refuses the retry
				br.mu.Unlock()
				w.WriteHeader(503)
			})
			p := noWait(3)
			p.Breaker = br
			resp, err := httpretry.New(srv.base(t), p).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonBreaker || o.Attempts != 1 || !errors.Is(o.Err, errOpen) {
				t.Errorf("Result = %+v, %v; want breaker after 1", o, ok)
			}
		})
		t.Run("permanent", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(404))
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonPermanent || o.Attempts != 1 {
				t.Errorf("Result = %+v, %v; want permanent after 1", o, ok)
			}
		})
		t.Run("advice", func(t *testing.T) {
			srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(503)
			})
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonAdvice || !errors.Is(o.Err, retry.ErrAdviceExceedsCap) {
				t.Errorf("Result = %+v, %v; want advice", o, ok)
			}
		})
		t.Run("throttled", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(503))
			p := noWait(3)
			lim := &retryRefuser{}
			p.Limiter = lim
			resp, err := httpretry.New(srv.base(t), p).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonThrottled || o.Attempts != 1 || !errors.Is(o.Err, errThrottled) {
				t.Errorf("Result = %+v, %v; want throttled after 1", o, ok)
			}
			if lim.done.Load() != 1 {
				t.Errorf("the limiter heard %d results, want 1", lim.done.Load())
			}
		})
		t.Run("nested", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(503))
			ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonNested || o.Attempts != 1 || !errors.Is(o.Err, retry.ErrNestedRetry) {
				t.Errorf("Result = %+v, %v; want nested after 1", o, ok)
			}
		})
		t.Run("success after a retry", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(503, 200))
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o, ok := httpretry.Result(resp)
			if !ok || o.Reason != retry.ReasonSuccess || o.Attempts != 2 || o.Err != nil {
				t.Errorf("Result = %+v, %v; want success after 2", o, ok)
			}
		})
		t.Run("success at once", func(t *testing.T) {
			srv := newModeServer(t, m, statuses(200))
			req := get(t, srv.URL)
			resp, err := httpretry.New(srv.base(t), noWait(3)).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if o, ok := httpretry.Result(resp); ok {
				t.Errorf("Result = %+v on a first-attempt success, want no record", o)
			}
			if resp.Request != req {
				t.Error("a first-attempt success's Request is not the caller's request")
			}
		})
	})
	if _, ok := httpretry.Result(nil); ok {
		t.Error("Result(nil) reported a record")
	}
	if _, ok := httpretry.Result(&http.Response{}); ok {
		t.Error("Result of a response without Request reported a record")
	}
}

var errThrottled = errors.New("stub limiter: throttled")

// retryRefuser is a retry.Limiter that admits first attempts only.
type retryRefuser struct{ done atomic.Int32 }

func (l *retryRefuser) Acquire(_ context.Context, retry bool) (func(error), error) {
	if retry {
		return nil, errThrottled
	}
	return func(error) { l.done.Add(1) }, nil
}
