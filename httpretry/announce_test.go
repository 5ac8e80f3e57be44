package httpretry_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// announcement is what one attempt told the server.
type announcement struct{ attempt, willRetry, deadline string }

// announcements records, per request, the layer headers under names.
type announcements struct {
	mu   sync.Mutex
	seen []announcement
}

func (a *announcements) record(r *http.Request, names httpretry.Headers) {
	get := func(name string) string {
		if name == "" {
			return ""
		}
		return strings.Join(r.Header.Values(name), ",")
	}
	a.mu.Lock()
	a.seen = append(a.seen, announcement{get(names.Attempt), get(names.WillRetry), get(names.Deadline)})
	a.mu.Unlock()
}

func (a *announcements) list() []announcement {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]announcement(nil), a.seen...)
}

// Issue #20, client side: every attempt announces its number, whether the
// transport may retry it, and the milliseconds left before its deadline,
// over every protocol; the caller's request is not modified.
func TestAnnounceEveryAttempt(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		var got announcements
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			got.record(r, httpretry.DefaultHeaders())
			if hit < 3 {
				w.WriteHeader(503)
			}
		})
		fc := clocktest.NewFake()
		p := noWait(3)
		p.Clock = fc
		ctx, cancel := clock.WithTimeout(context.Background(), fc, 1500*time.Millisecond, nil) // a deadline on the fake clock
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		req.Header.Set(layer.HeaderAttempt, "99") // replaced, not appended
		resp, err := httpretry.New(srv.base(t), p).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		want := []announcement{{"1", "1", "1500"}, {"2", "1", "1500"}, {"3", "0", "1500"}}
		if g := got.list(); !equalAnn(g, want) {
			t.Errorf("announced %+v, want %+v", g, want)
		}
		if req.Header.Get(layer.HeaderAttempt) != "99" || len(req.Header) != 1 {
			t.Errorf("caller's header modified: %v", req.Header)
		}
	})
}

func equalAnn(a, b []announcement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What Will-Retry and Deadline-Ms say in each situation.
func TestAnnounceTable(t *testing.T) {
	fc := clocktest.NewFake()
	deadline := func(d time.Duration) context.Context {
		ctx, cancel := clock.WithTimeout(context.Background(), fc, d, nil)
		t.Cleanup(cancel)
		return ctx
	}
	for _, c := range []struct {
		name   string
		ctx    context.Context
		method string
		policy func(p *retry.Policy)
		opts   []httpretry.Option
		names  httpretry.Headers
		want   []announcement
	}{
		{name: "no deadline", want: []announcement{{"1", "1", ""}, {"2", "0", ""}}},
		{name: "attempt timeout bounds the deadline", ctx: deadline(time.Minute),
			policy: func(p *retry.Policy) { p.AttemptTimeout = 250 * time.Millisecond },
			want:   []announcement{{"1", "1", "250"}, {"2", "0", "250"}}},
		{name: "attempt timeout without a deadline",
			policy: func(p *retry.Policy) { p.AttemptTimeout = 40 * time.Second },
			want:   []announcement{{"1", "1", "40000"}, {"2", "0", "40000"}}},
		{name: "a POST is sent once", method: http.MethodPost, want: []announcement{{"1", "0", ""}}},
		// One attempt here, and the next tier is told that the chain
		// retries (by the caller above), so it makes one attempt too.
		{name: "the inbound caller retries: one layer",
			ctx:  retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true}),
			want: []announcement{{"1", "1", ""}}},
		{name: "the inbound caller retries: rule ignored",
			ctx:    retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true}),
			policy: func(p *retry.Policy) { p.Nested = retry.NestedIgnore },
			want:   []announcement{{"1", "1", ""}, {"2", "1", ""}}},
		{name: "the inbound caller does not retry",
			ctx:  retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1}),
			want: []announcement{{"1", "1", ""}, {"2", "0", ""}}},
		{name: "renamed", opts: []httpretry.Option{httpretry.WithHeaders(httpretry.Headers{Attempt: "x-try", WillRetry: "x-again"})},
			names: httpretry.Headers{Attempt: "X-Try", WillRetry: "X-Again", Deadline: layer.HeaderDeadline},
			want:  []announcement{{"1", "1", ""}, {"2", "0", ""}}},
		{name: "renamed headers replace the defaults", opts: []httpretry.Option{httpretry.WithHeaders(httpretry.Headers{Attempt: "x-try"})},
			want: []announcement{{"", "", ""}, {"", "", ""}}},
		{name: "off", ctx: deadline(time.Second), opts: []httpretry.Option{httpretry.WithoutAnnounce()},
			want: []announcement{{"", "", ""}, {"", "", ""}}},
		{name: "WithAttemptHeader renames the attempt header", opts: []httpretry.Option{httpretry.WithAttemptHeader("X-Attempt")},
			names: httpretry.Headers{Attempt: "X-Attempt", WillRetry: layer.HeaderWillRetry},
			want:  []announcement{{"1", "1", ""}, {"2", "0", ""}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			names := c.names
			if names == (httpretry.Headers{}) {
				names = httpretry.DefaultHeaders()
			}
			var got announcements
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
				got.record(r, names)
				if c.name == "WithAttemptHeader renames the attempt header" && r.Header.Get(layer.HeaderAttempt) != "" {
					t.Error("the default attempt header was sent too")
				}
				w.WriteHeader(503)
			})
			p := noWait(2)
			p.Clock = fc
			if c.policy != nil {
				c.policy(p)
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			req, _ := http.NewRequestWithContext(ctx, method, srv.URL, strings.NewReader(""))
			resp, err := httpretry.New(newBase(t), p, c.opts...).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if g := got.list(); !equalAnn(g, c.want) {
				t.Errorf("announced %+v, want %+v", g, c.want)
			}
		})
	}
}

// Issue #20: a response carrying Stormguard-Overloaded: 1 is never
// retried, whatever the classifier and the attempt limit say; Result
// reports retry.ReasonOverloaded and an Err matching retry.ErrOverloaded;
// the breaker counts it against the downstream, the budget is not charged.
func TestOverloadedMarkerIsNotRetried(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set(layer.HeaderOverloaded, "1")
			w.WriteHeader(503)
			w.Write([]byte("shed"))
		})
		br := breaker.New(breaker.Config{ConsecutiveFailures: 1, Clock: clocktest.NewFake()})
		b := &refusingBudget{}
		p := noWait(5)
		p.Breaker, p.Budget = br, b
		resp, err := httpretry.New(srv.base(t), p, httpretry.WithRetry500()).RoundTrip(get(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != 503 || body != "shed" {
			t.Errorf("got %d %q, want the 503 intact", resp.StatusCode, body)
		}
		if n := srv.hits.Load(); n != 1 {
			t.Errorf("%d requests, want 1: the marker is never retried", n)
		}
		o, ok := httpretry.Result(resp)
		if !ok || o.Reason != retry.ReasonOverloaded || !errors.Is(o.Err, retry.ErrOverloaded) || !retry.IsOverloaded(o.Err) {
			t.Errorf("Result = %+v, %v; want overloaded", o, ok)
		}
		var se *httpretry.StatusError
		if !errors.As(o.Err, &se) || se.StatusCode != 503 {
			t.Errorf("no *StatusError in %v", o.Err)
		}
		if br.State() != breaker.Open {
			t.Errorf("breaker %v after an overloaded answer, want open (a fault)", br.State())
		}
		if b.withdrawals.Load() != 0 {
			t.Error("the budget was asked for a retry of an overloaded answer")
		}
	})
	// Without the marker's name the answer is an ordinary 503.
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		w.Header().Set(layer.HeaderOverloaded, "1")
		w.WriteHeader(503)
	})
	resp, err := httpretry.New(newBase(t), noWait(3), httpretry.WithHeaders(httpretry.Headers{})).RoundTrip(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := srv.hits.Load(); n != 3 {
		t.Errorf("%d requests with the marker turned off, want 3", n)
	}
}

// Issue #31 item 28: the overload marker counts only on 429 and 5xx. On a
// success (2xx, 3xx) or another client error it is ignored: a 200 that
// carries it is a success for the breaker and the caller, a 404 a plain
// 404, a 408 is retried as usual.
func TestOverloadedMarkerOnlyOn429And5xx(t *testing.T) {
	for _, c := range []struct {
		code       int
		overloaded bool
		hits       int64
	}{
		{200, false, 1},
		{204, false, 1},
		{304, false, 1},
		{404, false, 1},
		{408, false, 3}, // retried as any 408
		{429, true, 1},
		{500, true, 1},
		{502, true, 1},
		{503, true, 1},
	} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
				w.Header().Set(layer.HeaderOverloaded, "1")
				w.WriteHeader(c.code)
			})
			br := &stubBreaker{}
			p := noWait(3)
			p.Breaker = br
			resp, err := httpretry.New(newBase(t), p).RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if n := srv.hits.Load(); n != c.hits {
				t.Errorf("%d requests, want %d", n, c.hits)
			}
			o, _ := httpretry.Result(resp)
			if got := errors.Is(o.Err, retry.ErrOverloaded) || o.Reason == retry.ReasonOverloaded; got != c.overloaded {
				t.Errorf("%d with the marker: read as overloaded %v (Result %+v), want %v", c.code, got, o, c.overloaded)
			}
			results := br.results()
			if c.code < 400 && (len(results) != 1 || results[0] != nil) {
				t.Errorf("the breaker heard %v for a %d, want one success", results, c.code)
			}
		})
	}
}

// Issue #36: the announced values are shared, read-only, by every request
// copy of the same attempt number. A next RoundTripper that (against the
// RoundTripper contract) adds to or replaces an announced header of the
// request it is given changes that copy only: the next request still
// announces its own attempt alone, and the caller's header is untouched.
func TestAnnounceSharedValuesSurviveAMisbehavingTransport(t *testing.T) {
	var seen []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, strings.Join(r.Header.Values(layer.HeaderAttempt), ",")+"/"+
			strings.Join(r.Header.Values(layer.HeaderWillRetry), ","))
		r.Header.Add(layer.HeaderAttempt, "x")
		r.Header.Add(layer.HeaderWillRetry, "y")
		r.Header.Add("X-Caller", "z")
		return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
	})
	rt := httpretry.New(next, noWait(2))
	req := get(t, "http://127.0.0.1/")
	req.Header.Set("X-Caller", "a")
	for range 2 {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []string{"1/1", "2/0", "1/1", "2/0"}
	if !slices.Equal(seen, want) {
		t.Errorf("announced %q, want %q", seen, want)
	}
	if v := req.Header.Values("X-Caller"); !slices.Equal(v, []string{"a"}) {
		t.Errorf("caller's header now %q", v)
	}
}

// Issue #36: attempt numbers past the prebuilt values, and deadlines of
// every width, are announced exactly.
func TestAnnounceLongCalls(t *testing.T) {
	var got announcements
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got.record(r, httpretry.DefaultHeaders())
		return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
	})
	fc := clocktest.NewFake()
	p := noWait(40)
	p.Clock = fc
	ctx, cancel := clock.WithTimeout(context.Background(), fc, 1234567890123*time.Millisecond, nil)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/", nil)
	resp, err := httpretry.New(next, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var want []announcement
	for n := 1; n <= 40; n++ {
		want = append(want, announcement{strconv.Itoa(n), map[bool]string{true: "1", false: "0"}[n < 40], "1234567890123"})
	}
	if g := got.list(); !equalAnn(g, want) {
		t.Errorf("announced %+v, want %+v", g, want)
	}
}

// Issue #36: the prebuilt values are read by the attempts of many calls at
// once, over every protocol, each call with a header of its own; under
// -race this shows that nothing writes to what the attempts share, and
// every attempt announces its own number.
func TestAnnounceSharedValuesConcurrently(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			if r.Header.Get(layer.HeaderAttempt) != "3" {
				w.WriteHeader(503)
			}
			r.Header.Get("X-Caller")
		})
		rt := httpretry.New(srv.base(t), noWait(3))
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for range 5 {
					req := get(t, srv.URL)
					req.Header.Set("X-Caller", strconv.Itoa(i))
					resp, err := rt.RoundTrip(req)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("status %d, want 200 on the third attempt", resp.StatusCode)
					}
					if o, _ := httpretry.Result(resp); o.Attempts != 3 {
						t.Errorf("%d attempts, want 3", o.Attempts)
					}
				}
			})
		}
		wg.Wait()
	})
}

// Issue #36: an attempt's header is the caller's keys and values plus the
// announced ones, for every size of the caller's header — below, at and
// past the 8 keys a map holds before it grows (where the copy changes
// from a clone of the caller's map to a new one) — and the caller's
// header is never changed, even by a next RoundTripper that writes into
// the copy it is given. An announced attempt costs 3 allocations whatever
// the size while the keys fit in one map group.
func TestAnnounceCopiesHeadersOfEverySize(t *testing.T) {
	for k := range 12 {
		var seen []http.Header
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = append(seen, r.Header.Clone())
			r.Header.Set("X-Written-By-Next", "1")
			delete(r.Header, "X-H-0")
			return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
		})
		rt := httpretry.New(next, noWait(2))
		req := get(t, "http://127.0.0.1/")
		for i := range k {
			req.Header.Set("X-H-"+strconv.Itoa(i), "v"+strconv.Itoa(i))
		}
		want := req.Header.Clone()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(seen) != 2 {
			t.Fatalf("%d keys: %d attempts, want 2", k, len(seen))
		}
		for n, h := range seen {
			if got := h.Get(layer.HeaderAttempt); got != strconv.Itoa(n+1) {
				t.Errorf("%d keys, attempt %d: announced attempt %q", k, n+1, got)
			}
			for key, v := range want {
				if !slices.Equal(h[key], v) {
					t.Errorf("%d keys, attempt %d: %s = %q, want %q", k, n+1, key, h[key], v)
				}
			}
			if h.Get("X-Written-By-Next") != "" {
				t.Errorf("%d keys, attempt %d: saw the previous attempt's write", k, n+1)
			}
			if extra := len(h) - len(want); extra != 2 {
				t.Errorf("%d keys, attempt %d: %d keys beyond the caller's, want 2 (attempt, will-retry)", k, n+1, extra)
			}
		}
		if len(req.Header) != len(want) || req.Header.Get("X-Written-By-Next") != "" {
			t.Errorf("%d keys: the caller's header changed: %v", k, req.Header)
		}
		for key, v := range want {
			if !slices.Equal(req.Header[key], v) {
				t.Errorf("%d keys: the caller's %s = %q, want %q", k, key, req.Header[key], v)
			}
		}
	}

	ok := &http.Response{StatusCode: 200, Body: http.NoBody}
	rt := httpretry.New(roundTripFunc(func(*http.Request) (*http.Response, error) { return ok, nil }), noWait(2))
	for _, k := range []int{0, 3, 6} {
		req := get(t, "http://127.0.0.1/")
		for i := range k {
			req.Header.Set("X-H-"+strconv.Itoa(i), "v")
		}
		if a := testing.AllocsPerRun(100, func() {
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}); a > 3 {
			t.Errorf("%d caller keys: %.0f allocations per announced attempt, want at most 3", k, a)
		}
	}
}
