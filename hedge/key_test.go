package hedge_test

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
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// TestTransportKeyIsolatesHosts: through hedge.Transport, host a's failures
// open a's breaker only, and every copy's context carries the key.
func TestTransportKeyIsolatesHosts(t *testing.T) {
	clk := clocktest.NewFake()
	bs, err := keyed.NewBreakers(keyed.Config{Clock: clk}, breaker.Config{ConsecutiveFailures: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var keys atomic.Value
	next := rtFunc(func(r *http.Request) (*http.Response, error) {
		keys.Store(keyed.KeyFrom(r.Context()))
		if r.URL.Host == "a" {
			return nil, errors.New("refused")
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	tr := &hedge.Transport{Next: next, Hedger: &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 1, Breaker: bs, Clock: clk}, MaxHedges: hedge.NoHedges},
		Key: func(r *http.Request) string { return r.URL.Host }}
	get := func(host string) error {
		req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for range 3 {
		get("a")
	}
	if err := get("a"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("host a: %v, want its breaker open", err)
	}
	if err := get("b"); err != nil {
		t.Fatalf("host b: %v", err)
	}
	if k := keys.Load(); k != "b" {
		t.Fatalf("the copy's context carries %q, want b", k)
	}
}

// TestAdaptivesOnePerKey: hedge.Do feeds the Adaptive of the call's key.
func TestAdaptivesOnePerKey(t *testing.T) {
	clk := clocktest.NewFake()
	ads, err := hedge.NewAdaptives(keyed.Config{}, hedge.AdaptiveConfig{Clock: clk, MinSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := &hedge.Hedger{Policy: &retry.Policy{Clock: clk}, Adaptives: ads}
	ctx := keyed.WithKey(context.Background(), "slow")
	if _, err := hedge.Do(ctx, h, func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
		t.Fatal(err)
	}
	if ads.Len() != 1 {
		t.Fatalf("%d adaptives, want the one of key slow", ads.Len())
	}
	clk.Advance(2 * time.Second) // the delay is computed once per slot (a tenth of the window)
	_, okSlow := ads.Get("slow").Delay()
	_, okOther := ads.Get("other").Delay()
	if !okSlow || okOther {
		t.Fatalf("slow has samples: %v (want true), other: %v (want false)", okSlow, okOther)
	}
}

type closeCount struct {
	io.Reader
	n atomic.Int32
}

func (c *closeCount) Close() error { c.n.Add(1); return nil }

// TestTransportKeyPanicClosesBody: a Key function that panics sends
// nothing, closes the body, and the panic goes on.
func TestTransportKeyPanicClosesBody(t *testing.T) {
	sent := false
	tr := &hedge.Transport{Next: rtFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("x") }),
		Key: func(*http.Request) string { panic("key") }}
	body := &closeCount{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("PUT", "http://a/", body)
	func() {
		defer func() {
			if r := recover(); r != "key" {
				t.Fatalf("recovered %v", r)
			}
		}()
		tr.RoundTrip(req)
	}()
	if sent || body.n.Load() != 1 {
		t.Fatalf("sent %v, body closed %d times", sent, body.n.Load())
	}
}

// TestAdaptiveGroupBuildPanicTakesNoPermit: the key's Adaptive is looked
// up in a group whose build may panic (user code). hedge.Do began the
// inline attempt, taking the breaker's permit, before that lookup, so
// the panic left the permit out (a half-open breaker's probe slot taken
// for good). The lookup now comes first.
func TestAdaptiveGroupBuildPanicTakesNoPermit(t *testing.T) {
	br := &countingBreaker{}
	g, err := keyed.New(keyed.Config{}, func(k string) *hedge.Adaptive {
		if k == "boom" {
			panic("build")
		}
		return hedge.NewAdaptive(hedge.AdaptiveConfig{})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 3, Breaker: br}, Delay: time.Hour, Adaptives: g}
	func() {
		defer func() {
			if r := recover(); r != "build" {
				t.Fatalf("recovered %v, want the build panic", r)
			}
		}()
		hedge.Do(keyed.WithKey(context.Background(), "boom"), h, func(context.Context) (int, error) { return 1, nil }, nil)
	}()
	if br.allows != br.dones {
		t.Fatalf("breaker: %d allowed, %d done: a permit is left out", br.allows, br.dones)
	}
}
