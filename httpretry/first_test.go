package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// TestFirstAttemptAnnouncesAsCall: the first attempt of a plain policy
// (made without a pooled call) announces the attempt number and
// will-retry value that the Call path announces for the same request,
// policy and inbound facts (the Call path is taken here by adding an
// Observer, which hears nothing that changes them): for repeatable and
// unrepeatable requests, attempt limits of 1, 2, the default and
// unlimited, every layer rule, and callers that retry, do not, or sent
// no facts; for a first attempt that succeeds and one that is retried.
func TestFirstAttemptAnnouncesAsCall(t *testing.T) {
	inbounds := map[string]*retry.Inbound{
		"none":         nil,
		"not-retrying": {Attempt: 1},
		"retrying":     {Attempt: 1, Retries: true},
		"retried":      {Attempt: 2},
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, max := range []int{1, 2, 0, retry.Unlimited} {
			for _, rule := range []retry.NestedRule{retry.NestedOneLayer, retry.NestedBudget, retry.NestedIgnore} {
				for name, in := range inbounds {
					for _, codes := range [][]int{{200}, {503, 200}} {
						t.Run(fmt.Sprintf("%s/max=%d/%v/%s/%v", method, max, rule, name, codes), func(t *testing.T) {
							sent := func(observed bool) []string {
								var got []string
								hit := 0
								next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
									got = append(got, r.Header.Get(layer.HeaderAttempt)+"/"+r.Header.Get(layer.HeaderWillRetry))
									code := codes[min(hit, len(codes)-1)]
									hit++
									return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
								})
								p := &retry.Policy{MaxAttempts: max, Nested: rule, Backoff: zeroBackoff{}}
								if observed {
									p.Observer = new(retrytest.Recorder)
								}
								ctx := context.Background()
								if in != nil {
									ctx = retry.WithInbound(ctx, *in)
								}
								req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1/", nil)
								if err != nil {
									t.Fatal(err)
								}
								resp, err := httpretry.New(next, p).RoundTrip(req)
								if err != nil {
									t.Fatal(err)
								}
								resp.Body.Close()
								return got
							}
							fast, call := sent(false), sent(true)
							if fmt.Sprint(fast) != fmt.Sprint(call) {
								t.Errorf("announced %v without a pooled call, %v with one", fast, call)
							}
						})
					}
				}
			}
		}
	}
}

// TestRetryableRuleAskedOnce: the WithRetryable rule is asked once per
// request, before anything is sent, on the path without a pooled call
// too, whether the first attempt succeeds or is retried.
func TestRetryableRuleAskedOnce(t *testing.T) {
	for _, codes := range [][]int{{200}, {503, 503, 200}, {404}} {
		asked, sent := 0, 0
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if asked != 1 {
				t.Errorf("%v: attempt %d sent with the rule asked %d times", codes, sent+1, asked)
			}
			code := codes[min(sent, len(codes)-1)]
			sent++
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
		})
		rt := httpretry.New(next, noWait(3), httpretry.WithRetryable(func(r *http.Request) bool {
			asked++
			return httpretry.Idempotent(r)
		}))
		resp, err := rt.RoundTrip(get(t, "http://127.0.0.1/"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if asked != 1 || sent != len(codes) {
			t.Errorf("%v: rule asked %d times, %d attempts; want 1 and %d", codes, asked, sent, len(codes))
		}
	}
}

// TestAnnouncedHeaderOwnUnlessHTTPTransport: a next RoundTripper that is
// not an *http.Transport may write to the header of the request it gets
// (against the RoundTripper contract, but common): every attempt's
// request still has a header of its own, so what it writes reaches no
// other request, concurrent or later.
func TestAnnouncedHeaderOwnUnlessHTTPTransport(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		if v := r.Header.Get("X-Written"); v != "" {
			leaked = append(leaked, v)
		}
		mu.Unlock()
		r.Header.Set("X-Written", r.URL.Path) // against the contract
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	rt := httpretry.New(next, &retry.Policy{MaxAttempts: 3})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				resp, err := rt.RoundTrip(get(t, "http://127.0.0.1/"+strconv.Itoa(i*100+j)))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if len(leaked) > 0 {
		t.Errorf("header written by the next RoundTripper for one request seen by %d others (%v...)", len(leaked), leaked[0])
	}
}

// TestAnnouncedAllocationsOverBare: over an *http.Transport, a GET with
// an empty header (client.Get's) that succeeds at once costs, announcing
// the layer headers, three allocations more than a bare http.Transport on
// the client (the request copy, and the header map and its group: no map
// is shared between requests) and two on the in-process server
// (textproto's strings for the two header names it does not know), and
// none more silent, whatever the Transport's Proxy. Allocations are
// counted process-wide, rounded down, and compared with one of slack for
// the runtime's own; the bytes are not compared (net/http's pools).
func TestAnnouncedAllocationsOverBare(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop values: net/http's allocations vary")
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { io.WriteString(w, "ok") })
	policy := &retry.Policy{MaxAttempts: 3}
	perRequest := func(rt http.RoundTripper) float64 {
		client := &http.Client{Transport: rt}
		do := func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		do()
		allocs, _ := allocsPerRun(do)
		return allocs
	}
	bare := perRequest(newBase(t))
	envProxy := newBase(t)
	envProxy.Proxy = http.ProxyFromEnvironment // http.DefaultTransport's; loopback is never proxied
	ownProxy := newBase(t)
	ownProxy.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
		want float64
	}{
		{"announced", httpretry.New(newBase(t), policy), 5},
		{"announced, ProxyFromEnvironment", httpretry.New(envProxy, policy), 5},
		{"announced, a Proxy of the user's", httpretry.New(ownProxy, policy), 5},
		{"silent", httpretry.New(newBase(t), policy, httpretry.WithoutAnnounce()), 0},
	} {
		if extra := perRequest(c.rt) - bare; extra > c.want+1 {
			t.Errorf("%s: %.0f allocations per request over bare, want %.0f", c.name, extra, c.want)
		}
	}
}

// listenerPanicBreaker is a stubBreaker whose permit panics when told of
// a success, as a breaker re-raising a listener's panic does.
type listenerPanicBreaker struct{ stubBreaker }

func (b *listenerPanicBreaker) Allow() (func(error), error) {
	done, err := b.stubBreaker.Allow()
	if err != nil {
		return nil, err
	}
	return func(err error) {
		done(err)
		if err == nil {
			panic("listener")
		}
	}, nil
}

// TestInlineFirstAttemptWithBreaker: under a policy whose only mechanisms
// are a breaker and a budget, the first attempt (made without a pooled
// call) tells them what the Call path tells them: a success, a retried
// failure then a success, a refusal by the breaker (the error RoundTrip
// returns wraps it, and nothing is sent), a panic or runtime.Goexit in
// the next RoundTripper (the breaker hears a *retry.PanicError, the
// budget a failure, and the panic goes on), and a panic of the breaker's
// permit on success (the response is closed, the budget hears a failure).
func TestInlineFirstAttemptWithBreaker(t *testing.T) {
	ok := func(code int, closed *atomic.Int32) roundTripFunc {
		return func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: closeSignal{http.NoBody, closed}}, nil
		}
	}
	t.Run("success", func(t *testing.T) {
		br, bud := &stubBreaker{}, &refusingBudget{}
		resp, err := httpretry.New(ok(200, new(atomic.Int32)), &retry.Policy{Breaker: br, Budget: bud}).RoundTrip(get(t, "http://127.0.0.1/"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		if r := br.results(); len(r) != 1 || r[0] != nil || bud.records.Load() != 1 {
			t.Errorf("breaker heard %v, budget %d records; want [<nil>] and 1", r, bud.records.Load())
		}
	})
	t.Run("retried", func(t *testing.T) {
		br := &stubBreaker{}
		n := 0
		next := roundTripFunc(func(*http.Request) (*http.Response, error) {
			n++
			code := 200
			if n == 1 {
				code = 503
			}
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
		})
		p := noWait(3)
		p.Breaker = br
		resp, err := httpretry.New(next, p).RoundTrip(get(t, "http://127.0.0.1/"))
		if err != nil || resp.StatusCode != 200 || n != 2 {
			t.Fatal(resp, err, n)
		}
		var se *httpretry.StatusError
		if r := br.results(); len(r) != 2 || !errors.As(r[0], &se) || se.StatusCode != 503 || r[1] != nil {
			t.Errorf("breaker heard %v, want the 503 then success", r)
		}
	})
	t.Run("refused", func(t *testing.T) {
		br := &stubBreaker{open: true}
		sent := false
		next := roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("sent") })
		_, err := httpretry.New(next, &retry.Policy{Breaker: br}).RoundTrip(get(t, "http://127.0.0.1/"))
		var re *retry.Error
		if !errors.Is(err, errOpen) || !errors.As(err, &re) || re.Attempts != 0 || sent {
			t.Errorf("err %v (sent %v), want the breaker's refusal after no attempt", err, sent)
		}
	})
	for _, goexit := range []bool{false, true} {
		t.Run(fmt.Sprintf("next panics/goexit=%v", goexit), func(t *testing.T) {
			br, bud := &stubBreaker{}, &refusingBudget{}
			next := roundTripFunc(func(*http.Request) (*http.Response, error) {
				if goexit {
					runtime.Goexit()
				}
				panic("next")
			})
			returned, v := roundTripGoexit(httpretry.New(next, &retry.Policy{Breaker: br, Budget: bud}), get(t, "http://127.0.0.1/"))
			var pe *retry.PanicError
			if r := br.results(); returned || (v == nil) != goexit || len(r) != 1 || !errors.As(r[0], &pe) || bud.records.Load() != 1 {
				t.Errorf("returned %v, panic %v; breaker heard %v, budget %d records; want a *PanicError and 1", returned, v, r, bud.records.Load())
			}
		})
	}
	t.Run("permit panics on success", func(t *testing.T) {
		br, bud := &listenerPanicBreaker{}, &refusingBudget{}
		var closed atomic.Int32
		returned, v := roundTripGoexit(httpretry.New(ok(200, &closed), &retry.Policy{Breaker: br, Budget: bud}), get(t, "http://127.0.0.1/"))
		if returned || v != "listener" || closed.Load() != 1 || bud.records.Load() != 1 {
			t.Errorf("returned %v, panic %v, body closed %d times, budget %d records; want the panic, 1 and 1", returned, v, closed.Load(), bud.records.Load())
		}
	})
}

// TestProxyWritingHeaderGetsItsOwn: an *http.Transport whose Proxy
// function writes to the header of the request it is given (a
// Proxy-Authorization of the user's own, say) gets a header of its own for
// every first attempt: what it writes for one request reaches no other.
func TestProxyWritingHeaderGetsItsOwn(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		io.WriteString(w, r.Header.Get("X-Proxy-Written"))
	})
	var mu sync.Mutex
	seen := map[*http.Request]bool{}
	var leaked []string
	tr := newBase(t)
	tr.Proxy = func(r *http.Request) (*url.URL, error) {
		mu.Lock()
		defer mu.Unlock()
		if v := r.Header.Get("X-Proxy-Written"); v != "" {
			leaked = append(leaked, v)
		}
		seen[r] = true
		r.Header.Set("X-Proxy-Written", r.URL.Path)
		return nil, nil
	}
	client := &http.Client{Transport: httpretry.New(tr, &retry.Policy{MaxAttempts: 3})}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 10 {
				path := "/" + strconv.Itoa(i*100+j)
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != path {
					t.Errorf("server saw X-Proxy-Written %q, want %q", body, path)
				}
			}
		})
	}
	wg.Wait()
	if len(leaked) > 0 {
		t.Errorf("a header the Proxy wrote for one request was seen by %d others (%v...)", len(leaked), leaked[0])
	}
	if len(seen) == 0 {
		t.Fatal("the Proxy function was never called")
	}
}

// TestRegisteredProtocolWritingHeaderLeaksNothing: a protocol registered
// with the *http.Transport (RegisterProtocol) that writes to the header of
// the request it gets, against the RoundTripper contract, changes the
// header of no later request, with an empty caller header or not: no
// header map is shared between requests.
func TestRegisteredProtocolWritingHeaderLeaksNothing(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		io.WriteString(w, r.Header.Get("Authorization"))
	})
	tr := newBase(t)
	tr.RegisterProtocol("x", roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("Authorization", "Bearer x-secret")
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	}))
	rt := httpretry.New(tr, &retry.Policy{MaxAttempts: 3})
	req, err := http.NewRequest("GET", "x://h/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, hdrs := range []int{0, 1} {
		req := get(t, srv.URL)
		if hdrs == 1 {
			req.Header.Set("Accept", "text/plain")
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) > 0 {
			t.Errorf("http:// request with %d caller headers sent Authorization %q", hdrs, b)
		}
	}
}

// TestWriteIntoAnnouncedValueLeaksNothing: a protocol registered with the
// *http.Transport below (code of the user's that gets the attempt's
// request) writes into the announced values themselves, not through the
// header map. Every later request, of this transport or another, still
// announces its own attempt number and will-retry value: no announced
// value is shared between requests.
func TestWriteIntoAnnouncedValueLeaksNothing(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		io.WriteString(w, r.Header.Get(layer.HeaderAttempt)+" "+r.Header.Get(layer.HeaderWillRetry))
	})
	tr := newBase(t)
	tr.RegisterProtocol("x", roundTripFunc(func(r *http.Request) (*http.Response, error) {
		for _, k := range []string{layer.HeaderAttempt, layer.HeaderWillRetry} {
			if v := r.Header[k]; len(v) > 0 {
				v[0] = "9"
			}
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	}))
	for _, maxAttempts := range []int{1, 3} {
		rt := httpretry.New(tr, &retry.Policy{MaxAttempts: maxAttempts})
		req, err := http.NewRequest("GET", "x://h/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, c := range []struct {
		maxAttempts int
		want        string
	}{{1, "1 0"}, {3, "1 1"}} {
		rt := httpretry.New(newBase(t), &retry.Policy{MaxAttempts: c.maxAttempts})
		resp, err := rt.RoundTrip(get(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != c.want {
			t.Errorf("MaxAttempts %d: the server saw attempt and will-retry %q, want %q", c.maxAttempts, b, c.want)
		}
	}
}
