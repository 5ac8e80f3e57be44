package hedge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

type mode string

const (
	http1  mode = "http1"
	https1 mode = "https1"
	http2  mode = "http2"
)

// each runs f over HTTP/1.1, HTTP/1.1 over TLS and HTTP/2 over TLS, as
// net/http's own tests do.
func each(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range []mode{http1, https1, http2} {
		t.Run(string(m), func(t *testing.T) { f(t, m) })
	}
}

func serve(t *testing.T, m mode, h http.HandlerFunc) (*httptest.Server, http.RoundTripper) {
	ts := httptest.NewUnstartedServer(h)
	switch m {
	case http1:
		ts.Start()
	case https1:
		ts.StartTLS()
	case http2:
		ts.EnableHTTP2 = true
		ts.StartTLS()
	}
	rt := ts.Client().Transport
	t.Cleanup(func() {
		rt.(*http.Transport).CloseIdleConnections()
		ts.Close()
	})
	return ts, rt
}

// A hedged GET wins on a second request (a second connection over
// HTTP/1, a second stream over HTTP/2) while the first is cancelled: the
// server sees the first request's context end.
func TestHTTPHedgedGETWins(t *testing.T) {
	each(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var remotes []string
		var n atomic.Int32
		first := make(chan struct{})
		cancelled := make(chan error, 1)
		ts, rt := serve(t, m, func(w http.ResponseWriter, r *http.Request) {
			i := n.Add(1)
			mu.Lock()
			remotes = append(remotes, r.RemoteAddr)
			mu.Unlock()
			if want := map[mode]int{http1: 1, https1: 1, http2: 2}[m]; r.ProtoMajor != want {
				t.Errorf("request over HTTP/%d, want %d", r.ProtoMajor, want)
			}
			if i == 1 {
				close(first)
				<-r.Context().Done()
				cancelled <- r.Context().Err()
				return
			}
			io.WriteString(w, "answer 2")
		})
		clk := clocktest.NewFake()
		client := &http.Client{Transport: &hedge.Transport{
			Next:   rt,
			Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clk}, Delay: 50 * time.Millisecond},
		}}
		type res struct {
			body string
			err  error
		}
		out := make(chan res, 1)
		go func() {
			resp, err := client.Get(ts.URL)
			if err != nil {
				out <- res{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			out <- res{string(b), err}
		}()
		<-first
		clk.BlockUntil(1)
		clk.Advance(50 * time.Millisecond)
		var r res
		select {
		case r = <-out:
		case <-time.After(10 * time.Second):
			t.Fatal("no response")
		}
		if r.err != nil || r.body != "answer 2" {
			t.Fatalf("got %q, %v; want the hedge's answer", r.body, r.err)
		}
		select {
		case err := <-cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("first request's server context ended with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the first request was not cancelled server-side")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(remotes) != 2 {
			t.Fatalf("%d requests reached the server", len(remotes))
		}
		if m != http2 && remotes[0] == remotes[1] {
			t.Fatalf("both copies on connection %s", remotes[0])
		}
	})
}

// A non-idempotent request is never hedged: no hedge timer is armed and
// the server gets it once. With an Idempotency-Key, the POST is hedged
// and every copy carries the body.
func TestHTTPNonIdempotentNeverHedged(t *testing.T) {
	each(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var bodies []string
		arrived := make(chan struct{}, 4)
		release := make(chan struct{})
		gate := release // what the first copy of a request waits for
		ts, rt := serve(t, m, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			k := len(bodies)
			g := gate
			mu.Unlock()
			arrived <- struct{}{}
			if k == 1 {
				select {
				case <-g:
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, "done")
		})
		clk := clocktest.NewFake()
		client := &http.Client{Transport: &hedge.Transport{
			Next:   rt,
			Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clk}, Delay: 50 * time.Millisecond},
		}}
		post := func(key string) chan error {
			out := make(chan error, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("payload"))
				if key != "" {
					req.Header.Set("Idempotency-Key", key)
				}
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				out <- err
			}()
			return out
		}

		out := post("")
		<-arrived
		if n := clk.Pending(); n != 0 {
			t.Fatalf("%d timers armed for a POST", n)
		}
		close(release)
		if err := <-out; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(bodies) != 1 {
			t.Fatalf("the POST reached the server %d times", len(bodies))
		}
		bodies = nil
		gate = make(chan struct{}) // the first copy now waits until cancelled
		mu.Unlock()

		out = post("k1")
		<-arrived
		clk.BlockUntil(1)
		clk.Advance(50 * time.Millisecond)
		if err := <-out; err != nil {
			t.Fatal(err)
		}
		<-arrived
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 2 || bodies[0] != "payload" || bodies[1] != "payload" {
			t.Fatalf("server got bodies %q", bodies)
		}
	})
}

// AttemptTimeout bounds a copy until its headers come: the first copy is
// cut and retried, and the second's body outlives the timeout.
func TestHTTPAttemptTimeoutBoundsHeadersOnly(t *testing.T) {
	each(t, func(t *testing.T, m mode) {
		var n atomic.Int32
		firstIn, firstCut := make(chan struct{}), make(chan struct{})
		rest := make(chan struct{})
		ts, rt := serve(t, m, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				close(firstIn)
				<-r.Context().Done()
				close(firstCut)
				return
			}
			io.WriteString(w, "head ")
			w.(http.Flusher).Flush()
			select {
			case <-rest:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "tail")
		})
		clk := clocktest.NewFake()
		client := &http.Client{Transport: &hedge.Transport{
			Next: rt,
			Hedger: &hedge.Hedger{
				Policy: &retry.Policy{Clock: clk, MaxAttempts: 2, AttemptTimeout: time.Second, Backoff: backoff.Constant{}},
				Delay:  time.Hour,
			},
		}}
		type res struct {
			resp *http.Response
			err  error
		}
		out := make(chan res, 1)
		go func() {
			resp, err := client.Get(ts.URL)
			out <- res{resp, err}
		}()
		<-firstIn
		clk.BlockUntil(2) // the hedge timer and the first copy's header timer
		clk.Advance(time.Second)
		<-firstCut
		var r res
		select {
		case r = <-out:
		case <-time.After(10 * time.Second):
			t.Fatal("no response")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.resp.Body.Close()
		clk.Advance(time.Hour) // long past the second copy's AttemptTimeout
		close(rest)
		b, err := io.ReadAll(r.resp.Body)
		if err != nil || string(b) != "head tail" {
			t.Fatalf("body %q, %v", b, err)
		}
		if got := n.Load(); got != 2 {
			t.Fatalf("%d requests", got)
		}
	})
}

// A 503 lets the call go on (here a retry); when every copy gets one, the
// last response comes back with its body intact and a nil error.
func TestHTTPRetryableStatus(t *testing.T) {
	each(t, func(t *testing.T, m mode) {
		var n atomic.Int32
		var okAt atomic.Int32
		okAt.Store(2)
		ts, rt := serve(t, m, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) < okAt.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "busy")
				return
			}
			io.WriteString(w, "ok")
		})
		client := &http.Client{Transport: &hedge.Transport{
			Next: rt,
			Hedger: &hedge.Hedger{
				Policy: &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}},
				Delay:  time.Hour,
			},
		}}
		get := func() (int, string) {
			t.Helper()
			resp, err := client.Get(ts.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, string(b)
		}
		if code, body := get(); code != 200 || body != "ok" || n.Load() != 2 {
			t.Fatalf("got %d %q after %d requests", code, body, n.Load())
		}
		n.Store(0)
		okAt.Store(100)
		if code, body := get(); code != 503 || body != "busy" || n.Load() != 2 {
			t.Fatalf("got %d %q after %d requests; want the last 503 with its body", code, body, n.Load())
		}
	})
}
