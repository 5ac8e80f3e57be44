package layer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

func TestOverloadAnswer(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{0, "1"}, {time.Millisecond, "1"}, {time.Second, "1"}, {1500 * time.Millisecond, "2"}, {time.Minute, "60"}} {
		w := httptest.NewRecorder()
		layer.Overload(w, c.d)
		if w.Code != 503 || w.Header().Get("Retry-After") != c.want || w.Header().Get(layer.HeaderOverloaded) != "1" {
			t.Errorf("Overload(%v) = %d, Retry-After %q, marker %q; want 503, %q, 1", c.d, w.Code,
				w.Header().Get("Retry-After"), w.Header().Get(layer.HeaderOverloaded), c.want)
		}
	}
}

// HandlerFunc answers an error that wraps the marker with the overload
// answer, another error with 500, and leaves a response it began alone.
func TestHandlerFuncErrors(t *testing.T) {
	errDown := errors.New("downstream said so")
	for _, c := range []struct {
		name   string
		f      layer.HandlerFunc
		code   int
		marker string
		after  string
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) error { io.WriteString(w, "ok"); return nil }, 200, "", ""},
		{"overloaded", func(w http.ResponseWriter, r *http.Request) error {
			return fmt.Errorf("calling tier 3: %w", retry.Overloaded(errDown))
		}, 503, "1", "7"},
		{"the sentinel itself", func(w http.ResponseWriter, r *http.Request) error { return retry.ErrOverloaded }, 503, "1", "7"},
		{"other error", func(w http.ResponseWriter, r *http.Request) error { return errDown }, 500, "", ""},
		// Issue #31 item 25: not retried here because the caller retries.
		{"not retried here", func(w http.ResponseWriter, r *http.Request) error {
			return &retry.Error{Attempts: 1, Reason: retry.ErrNestedRetry, Last: errDown}
		}, 503, "", ""},
		{"not retried here, with the downstream's advice", func(w http.ResponseWriter, r *http.Request) error {
			return fmt.Errorf("calling tier 3: %w", &retry.Error{Attempts: 1, Reason: retry.ErrNestedRetry, Last: retry.After(errDown, 2500*time.Millisecond)})
		}, 503, "", "3"},
		{"overloaded wins over not retried here", func(w http.ResponseWriter, r *http.Request) error {
			return errors.Join(retry.ErrNestedRetry, retry.Overloaded(errDown))
		}, 503, "1", "7"},
		{"already answered", func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(202)
			return retry.Overloaded(errDown)
		}, 202, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			layer.Middleware(c.f, layer.WithRetryAfter(7*time.Second)).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != c.code || w.Header().Get(layer.HeaderOverloaded) != c.marker || w.Header().Get("Retry-After") != c.after {
				t.Errorf("answer %d marker %q Retry-After %q, want %d %q %q", w.Code, w.Header().Get(layer.HeaderOverloaded),
					w.Header().Get("Retry-After"), c.code, c.marker, c.after)
			}
		})
	}
	// Served alone, without Middleware.
	w := httptest.NewRecorder()
	layer.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return retry.ErrOverloaded }).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get(layer.HeaderOverloaded) != "1" {
		t.Errorf("a HandlerFunc alone answered %d %v", w.Code, w.Header())
	}
}

// Limit serves n requests at once on a real loopback server and sheds the
// others with the overload answer, without allocating.
func TestLimitSheds(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	var hits atomic.Int32
	srv := httptest.NewServer(layer.Limit(2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			entered.Done()
			<-release
		}
		io.WriteString(w, "served")
	})))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	entered.Wait()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get(layer.HeaderOverloaded) != "1" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third request in flight: %d %v, want the overload answer", resp.StatusCode, resp.Header)
	}
	close(release)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Errorf("requests within the limit answered %v", codes)
	}
	// Slots are released: a fresh request is served.
	resp, err = srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after the burst: %d, want 200", resp.StatusCode)
	}

	h := layer.Limit(1, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec, req := httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(rec, req) }); n != 0 {
		t.Errorf("Limit: %v allocations per served request, want 0", n)
	}
}

// A panicking handler gives its slot back.
func TestLimitReleasesOnPanic(t *testing.T) {
	var panics atomic.Bool
	panics.Store(true)
	h := layer.Limit(1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panics.Load() {
			panic("boom")
		}
	}))
	for range 3 {
		func() {
			defer func() { recover() }()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
	}
	panics.Store(false)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 200 {
		t.Errorf("after panics: %d, want 200 (a panicking handler kept its slot)", w.Code)
	}
}

func TestLimitRejectsNoLimit(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Limit(0, h) did not panic")
		}
	}()
	layer.Limit(0, http.NotFoundHandler())
}

// NotRetriedHere is true for an error the layer rule stopped (as retry.Do
// reports it, wrapped or not) and false for the overload marker, other
// stops and nil.
func TestNotRetriedHere(t *testing.T) {
	errDown := errors.New("connection reset")
	p := &retry.Policy{MaxAttempts: 4, Backoff: zeroBackoff{}}
	inbound := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	nested := retry.Run(inbound, p, func(context.Context) error { return errDown })
	alone := retry.Run(context.Background(), p, func(context.Context) error { return errDown })
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"stopped by the layer rule", nested, true},
		{"wrapped", fmt.Errorf("calling tier 3: %w", nested), true},
		{"attempts exhausted", alone, false},
		{"overloaded", retry.Overloaded(nested), false},
		{"plain", errDown, false},
		{"nil", nil, false},
	} {
		if got := layer.NotRetriedHere(c.err); got != c.want {
			t.Errorf("%s: NotRetriedHere(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// Issue #31 item 27: Overload (and the answers HandlerFunc writes for an
// error) drop a Content-Length the handler had already set for other
// content, as http.Error does; otherwise the client reads a truncated body
// (unexpected EOF). On a real loopback server.
func TestOverloadDropsContentLength(t *testing.T) {
	errDown := errors.New("down")
	for _, c := range []struct {
		name string
		h    http.Handler
		want string
	}{
		{"Overload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			layer.Overload(w, time.Second)
		}), "overloaded; do not retry\n"},
		{"HandlerFunc overloaded", layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", "1000")
			return retry.Overloaded(errDown)
		}), "overloaded; do not retry\n"},
		{"HandlerFunc not retried here", layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", "1000")
			return &retry.Error{Attempts: 1, Reason: retry.ErrNestedRetry, Last: errDown}
		}), "unavailable; not retried here, retry at the caller\n"},
		{"HandlerFunc other error", layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", "1000")
			return errDown
		}), "Internal Server Error\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != c.want {
				t.Errorf("body %q, %v; want %q whole", body, err, c.want)
			}
		})
	}
}

// Issue #31 item 29: the Retry-After set with WithRetryAfter on Middleware
// holds under Limit, in the README's nesting Middleware(Limit(HandlerFunc)):
// for the overload answer of the handler's error and for Limit's own
// sheds, unless Limit was given a WithRetryAfter of its own, which then
// wins (the nearest setting around the handler).
func TestMiddlewareRetryAfterHoldsUnderLimit(t *testing.T) {
	for _, c := range []struct {
		name     string
		limitOpt []layer.Option
		want     string
	}{
		{"Limit without its own", nil, "7"},
		{"Limit with its own", []layer.Option{layer.WithRetryAfter(3 * time.Second)}, "3"},
		{"Limit with the default restored", []layer.Option{layer.WithRetryAfter(0)}, "7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			h := layer.Middleware(layer.Limit(1, layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				if r.URL.Path == "/block" {
					close(entered)
					<-release
					return nil
				}
				return fmt.Errorf("pricing: %w", retry.ErrOverloaded)
			}), c.limitOpt...), layer.WithRetryAfter(7*time.Second))

			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != 503 || w.Header().Get("Retry-After") != c.want || w.Header().Get(layer.HeaderOverloaded) != "1" {
				t.Errorf("the handler's overload: %d, Retry-After %q, marker %q; want 503, %q, 1", w.Code, w.Header().Get("Retry-After"), w.Header().Get(layer.HeaderOverloaded), c.want)
			}

			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/block", nil))
			}()
			<-entered
			w = httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			close(release)
			<-done
			if w.Code != 503 || w.Header().Get("Retry-After") != c.want {
				t.Errorf("Limit's shed: %d, Retry-After %q; want 503, %q", w.Code, w.Header().Get("Retry-After"), c.want)
			}
		})
	}
}

// Sweep (arithmetic at the extremes): a Retry-After near math.MaxInt64
// saturates to the largest whole number of seconds instead of wrapping
// round to 1 s — the longest wait asked for must not turn into the
// shortest. The Middleware option and NotRetried's advice alike.
func TestOverloadRetryAfterSaturates(t *testing.T) {
	const most = "9223372037" // math.MaxInt64 ns, rounded up to seconds
	huge := time.Duration(math.MaxInt64)
	w := httptest.NewRecorder()
	layer.Overload(w, huge)
	if got := w.Header().Get("Retry-After"); got != most {
		t.Errorf("Overload(MaxInt64): Retry-After %q, want %q", got, most)
	}
	w = httptest.NewRecorder()
	layer.Overload(w, huge-time.Second/2)
	if got := w.Header().Get("Retry-After"); got != most {
		t.Errorf("Overload(MaxInt64 - 0.5s): Retry-After %q, want %q", got, most)
	}
	w = httptest.NewRecorder()
	layer.Middleware(layer.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return retry.ErrOverloaded }),
		layer.WithRetryAfter(huge)).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if got := w.Header().Get("Retry-After"); got != most {
		t.Errorf("WithRetryAfter(MaxInt64): Retry-After %q, want %q", got, most)
	}
	w = httptest.NewRecorder()
	layer.NotRetried(w, &retry.Error{Attempts: 1, Reason: retry.ErrNestedRetry, Last: retry.After(errors.New("down"), huge)})
	if got := w.Header().Get("Retry-After"); got != most {
		t.Errorf("NotRetried with advice MaxInt64: Retry-After %q, want %q", got, most)
	}
}
