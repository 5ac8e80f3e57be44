package layer_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// zeroBackoff retries at once: the chain tests are about how many
// requests each tier sends, not when.
type zeroBackoff struct{}

func (zeroBackoff) Delay(int, time.Duration) time.Duration { return 0 }

// policy makes up to 4 attempts at once under rule.
func policy(rule retry.NestedRule) *retry.Policy {
	return &retry.Policy{MaxAttempts: 4, Backoff: zeroBackoff{}, Nested: rule}
}

// tier is one real loopback server of a call chain, with Middleware
// installed, counting the requests it receives.
type tier struct {
	srv  *httptest.Server
	hits atomic.Int64
}

// mode is the protocol a chain test runs over, as in httpretry's tests
// (httpretry/modes_test.go): one test body, every protocol.
type mode string

const (
	http1Mode  mode = "h1"     // HTTP/1.1 over TCP
	https1Mode mode = "https1" // HTTP/1.1 over TLS
	http2Mode  mode = "h2"     // HTTP/2 over TLS
)

var allModes = []mode{http1Mode, https1Mode, http2Mode}

// runModes runs fn as a subtest per mode (all of them when none is given).
func runModes(t *testing.T, fn func(t *testing.T, m mode), modes ...mode) {
	t.Helper()
	if len(modes) == 0 {
		modes = allModes
	}
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) { fn(t, m) })
	}
}

func (m mode) protoMajor() int {
	if m == http2Mode {
		return 2
	}
	return 1
}

// newTier starts a tier serving h behind Middleware, speaking the
// protocol of m; a request over another protocol fails the test.
func newTier(t *testing.T, m mode, h http.Handler) *tier {
	t.Helper()
	tr := &tier{}
	tr.srv = httptest.NewUnstartedServer(layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.hits.Add(1)
		if r.ProtoMajor != m.protoMajor() {
			t.Errorf("request over %s, want HTTP/%d", r.Proto, m.protoMajor())
		}
		h.ServeHTTP(w, r)
	})))
	tr.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	switch m {
	case http1Mode:
		tr.srv.Start()
	case https1Mode:
		tr.srv.StartTLS()
	case http2Mode:
		tr.srv.EnableHTTP2 = true
		tr.srv.StartTLS()
	}
	t.Cleanup(tr.srv.Close)
	return tr
}

// base is a fresh client transport for tr (trusting its certificate),
// closed when the test ends.
func (tr *tier) base(t *testing.T) http.RoundTripper {
	t.Helper()
	b := tr.srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// relay is a middle tier's handler: it calls next through httpretry under
// p and answers with next's status; a downstream's overload marker is
// returned as the error, for Middleware to pass up.
func relay(t *testing.T, next *tier, p retry.PolicySource) layer.HandlerFunc {
	client := &http.Client{Transport: httpretry.New(next.base(t), p)}
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next.srv.URL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok && errors.Is(o.Err, retry.ErrOverloaded) {
			return o.Err
		}
		w.WriteHeader(resp.StatusCode)
		return nil
	}
}

// chain is caller → tier 1 → tier 2 → bottom.
type chain struct {
	t1, t2, bottom *tier
	caller         *http.Client
}

// newChain builds the chain: every client (the caller's and the two
// middle tiers') uses a policy from mk; the bottom answers with bottom.
func newChain(t *testing.T, m mode, mk func() *retry.Policy, bottom http.HandlerFunc) *chain {
	c := &chain{}
	c.bottom = newTier(t, m, bottom)
	c.t2 = newTier(t, m, relay(t, c.bottom, mk()))
	c.t1 = newTier(t, m, relay(t, c.t2, mk()))
	c.caller = &http.Client{Transport: httpretry.New(c.t1.base(t), mk())}
	return c
}

// call makes one call from the caller, bounded in time, and returns the
// status and the Outcome.
func (c *chain) call(t *testing.T) (int, httpretry.Outcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.t1.srv.URL, nil)
	resp, err := c.caller.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o, _ := httpretry.Result(resp)
	return resp.StatusCode, o
}

func unavailable(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

func overloaded(w http.ResponseWriter, r *http.Request) { layer.Overload(w, time.Second) }

// The layer rule over retry.Do and over httpretry, a real loopback server
// per tier: a caller makes one request to a middle tier (with the headers
// httpretry would send on a first attempt that may be retried, or that may
// not), whose handler calls a failing bottom tier with up to 4 attempts.
// The bottom's load is what the rule lets the middle tier make.
func TestLayerRuleTable(t *testing.T) {
	grants := budget.NewRatio(budget.RatioConfig{MaxTokens: 100})
	refuses := budget.NewRatio(budget.RatioConfig{StartEmpty: true})
	for _, c := range []struct {
		name      string
		willRetry string // what the caller announces; "" sends nothing
		attempt   string
		rule      retry.NestedRule
		nb        retry.Budget
		want      int64
	}{
		{"no facts", "", "", retry.NestedOneLayer, nil, 4},
		{"caller will not retry", "0", "1", retry.NestedOneLayer, nil, 4},
		{"caller retries: one layer", "1", "1", retry.NestedOneLayer, nil, 1},
		{"caller's last attempt: one layer", "0", "4", retry.NestedOneLayer, nil, 1},
		{"caller retries: nested budget nil", "1", "1", retry.NestedBudget, nil, 1},
		{"caller retries: nested budget grants", "1", "1", retry.NestedBudget, grants, 4},
		{"caller retries: nested budget refuses", "1", "1", retry.NestedBudget, refuses, 1},
		{"caller retries: rule ignored", "1", "1", retry.NestedIgnore, nil, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func() *retry.Policy {
				p := policy(c.rule)
				p.NestedBudget = c.nb
				return p
			}
			for _, via := range []string{"retry.Do", "httpretry"} {
				t.Run(via, func(t *testing.T) {
					bottom := newTier(t, http1Mode, http.HandlerFunc(unavailable))
					var h http.Handler
					if via == "httpretry" {
						h = relay(t, bottom, mk())
					} else {
						plain := &http.Client{Transport: bottom.base(t)}
						h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							_, err := retry.Do(r.Context(), mk(), func(ctx context.Context) (int, error) {
								req, _ := http.NewRequestWithContext(ctx, http.MethodGet, bottom.srv.URL, nil)
								resp, err := plain.Do(req)
								if err != nil {
									return 0, err
								}
								resp.Body.Close()
								if resp.StatusCode != 200 {
									return resp.StatusCode, errors.New(resp.Status)
								}
								return 200, nil
							})
							if err == nil {
								t.Error("the bottom tier fails; the call cannot succeed")
							}
							w.WriteHeader(http.StatusBadGateway)
						})
					}
					mid := newTier(t, http1Mode, h)
					req, _ := http.NewRequest(http.MethodGet, mid.srv.URL, nil)
					if c.attempt != "" {
						req.Header.Set(layer.HeaderAttempt, c.attempt)
						req.Header.Set(layer.HeaderWillRetry, c.willRetry)
					}
					client := &http.Client{Transport: mid.base(t), Timeout: 20 * time.Second}
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if got := bottom.hits.Load(); got != c.want {
						t.Errorf("the bottom tier got %d requests, want %d", got, c.want)
					}
				})
			}
		})
	}
}

// Issue #20: the overload marker crosses three real tiers — the bottom
// sheds, and every tier above passes the marker up — and stops every
// retry on the way: each tier sees exactly one request, and the caller
// learns retry.ReasonOverloaded. Over HTTP/1.1 and HTTP/2 (TLS).
func TestOverloadMarkerCrossesThreeTiers(t *testing.T) {
	runModes(t, func(t *testing.T, m mode) {
		// NestedIgnore everywhere: only the marker stops the retries.
		c := newChain(t, m, func() *retry.Policy { return policy(retry.NestedIgnore) }, overloaded)
		code, o := c.call(t)
		if code != 503 || o.Reason != retry.ReasonOverloaded || !errors.Is(o.Err, retry.ErrOverloaded) || o.Attempts != 1 {
			t.Errorf("the caller got %d, %+v; want 503 overloaded after 1 attempt", code, o)
		}
		for name, tr := range map[string]*tier{"tier 1": c.t1, "tier 2": c.t2, "bottom": c.bottom} {
			if n := tr.hits.Load(); n != 1 {
				t.Errorf("%s got %d requests, want 1", name, n)
			}
		}
	})
}

// dropConnection is a bottom tier whose every request fails in transit:
// the handler aborts, so the client sees the connection closed before a
// response (HTTP/1.1: io.EOF) or the stream reset (HTTP/2:
// INTERNAL_ERROR) — the transient transport error a retry is for.
func dropConnection(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }

// Issue #31 item 25: a dropped connection at the bottom of a three-tier
// chain built as the README shows (Middleware + HandlerFunc returning the
// client's error), under the default layer rule everywhere. Tier 2 makes
// one attempt because tier 1's caller retries; its error must reach tier
// 1 as a retryable answer (a 503 without the overload marker) and tier 1
// must pass that up, so that the caller — the one layer that retries —
// makes its 4 attempts, and each tier sees exactly one request per
// attempt. Before the fix tier 2 answered 500, which nobody retries: the
// whole chain made one attempt.
func TestTransportErrorRetriedAtOneLayer(t *testing.T) {
	runModes(t, func(t *testing.T, m mode) {
		c := newChain(t, m, func() *retry.Policy { return policy(retry.NestedOneLayer) }, dropConnection)
		code, o := c.call(t)
		if code != http.StatusServiceUnavailable || o.Reason != retry.ReasonAttempts || o.Attempts != 4 {
			t.Errorf("the caller got %d, %+v; want 503 after its 4 attempts", code, o)
		}
		if errors.Is(o.Err, retry.ErrOverloaded) {
			t.Errorf("the caller read the answer as overloaded (%v): it is only \"not retried here\"", o.Err)
		}
		for name, tr := range map[string]*tier{"tier 1": c.t1, "tier 2": c.t2, "bottom": c.bottom} {
			if n := tr.hits.Load(); n != 4 {
				t.Errorf("%s got %d requests, want 4 (one per attempt of the caller)", name, n)
			}
		}
	})
}

// Issue #20's end-to-end bound: a 3-tier chain (caller → tier 1 → tier 2
// → bottom) over a failing bottom tier, every client making up to 4
// attempts. Naive retries at every tier multiply the bottom's load by 4³
// = 64 (at least 30× asked); the layer rule (the default,
// retry.NestedOneLayer) keeps it at 4× (at most 4.5× asked): only the
// caller retries; with the bottom answering "overloaded; don't retry" and
// a retry budget in every client, 1× (at most 1.5× asked). Bounded: 10
// calls, zero backoff, every call under a 20 s deadline.
func TestChainAmplification(t *testing.T) {
	const calls = 10
	for _, c := range []struct {
		name   string
		mk     func() *retry.Policy
		bottom http.HandlerFunc
		min    float64
		max    float64
	}{
		{"naive", func() *retry.Policy { return policy(retry.NestedIgnore) }, unavailable, 30, 64},
		{"layer rule", func() *retry.Policy { return policy(retry.NestedOneLayer) }, unavailable, 1, 4.5},
		{"layer rule, marker and budget", func() *retry.Policy {
			p := policy(retry.NestedOneLayer)
			p.Budget = budget.NewRatio(budget.TenPercent())
			return p
		}, overloaded, 1, 1.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := newChain(t, http1Mode, c.mk, c.bottom)
			for range calls {
				if code, _ := ch.call(t); code < 500 {
					t.Fatalf("the caller got %d over a failing bottom tier", code)
				}
			}
			amp := float64(ch.bottom.hits.Load()) / calls
			t.Logf("%s: per call, tier 1 %.1f, tier 2 %.1f, bottom %.1f requests", c.name,
				float64(ch.t1.hits.Load())/calls, float64(ch.t2.hits.Load())/calls, amp)
			if amp < c.min || amp > c.max {
				t.Errorf("bottom-tier amplification %.2f×, want within [%v, %v]", amp, c.min, c.max)
			}
		})
	}
}
