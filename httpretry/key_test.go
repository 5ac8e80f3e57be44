package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// TestDeadHostOpensOnlyItsBreaker: two hosts behind one client with
// keyed.Breakers; the dead one's breaker opens, the other's calls go on.
func TestDeadHostOpensOnlyItsBreaker(t *testing.T) {
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer dead.Close()
	var sawKey atomic.Value
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer live.Close()
	clk := clocktest.NewFake()
	bs, err := keyed.NewBreakers(keyed.Config{Clock: clk}, breaker.Config{ConsecutiveFailures: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p := &retry.Policy{MaxAttempts: 1, Breaker: bs, Clock: clk}
	spy := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sawKey.Store(keyed.KeyFrom(r.Context()))
		return http.DefaultTransport.RoundTrip(r)
	})
	client := &http.Client{Transport: httpretry.New(spy, p)}
	defer client.CloseIdleConnections()
	get := func(url string) error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	for range 3 {
		get(dead.URL)
	}
	if err := get(dead.URL); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("dead host: %v, want its breaker open", err)
	}
	if err := get(live.URL); err != nil {
		t.Fatalf("live host refused by the dead host's breaker: %v", err)
	}
	if k, want := sawKey.Load(), "http://"+strings.TrimPrefix(live.URL, "http://"); k != want {
		t.Fatalf("attempt context key %q, want %q", k, want)
	}
	if n := bs.Len(); n != 2 {
		t.Fatalf("%d breakers, want 2", n)
	}
}

type closeSpy struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeSpy) Close() error { c.closed.Add(1); return nil }

// TestKeyFuncPanicReleasesEverything: a WithKey function that panics sends
// nothing, closes the body, takes no breaker permit, and the panic goes on.
func TestKeyFuncPanicReleasesEverything(t *testing.T) {
	bs, err := keyed.NewBreakers(keyed.Config{MaxKeys: 1}, breaker.Config{MaxProbes: 1})
	if err != nil {
		t.Fatal(err)
	}
	sent := false
	rt := httpretry.New(roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("x") }),
		&retry.Policy{Breaker: bs}, httpretry.WithKey(func(*http.Request) string { panic("key") }))
	body := &closeSpy{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(context.Background(), "PUT", "http://a.example/", body)
	func() {
		defer func() {
			if r := recover(); r != "key" {
				t.Fatalf("recovered %v, want the key function's panic", r)
			}
		}()
		rt.RoundTrip(req)
	}()
	if sent || body.closed.Load() != 1 || bs.Len() != 0 {
		t.Fatalf("sent %v, body closed %d times, %d breakers", sent, body.closed.Load(), bs.Len())
	}
}

func TestHostKey(t *testing.T) {
	for url, want := range map[string]string{
		"https://Example.com/x": "https://example.com:443",
		"http://a:8080/":        "http://a:8080",
		"http://[::1]/":         "http://[::1]:80",
	} {
		req, _ := http.NewRequest("GET", url, nil)
		if got := httpretry.HostKey(req); got != want {
			t.Errorf("%s: %q, want %q", url, got, want)
		}
	}
}
