package config

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// perFile is a policy p whose breaker, budget and limiter are split per
// the given key, and a policy h with an adaptive hedge delay per key.
func perFile(t *testing.T, per, maxKeys string) *File {
	t.Helper()
	return mustParse(t, `
policies:
  p:
    max_attempts: 1
    breaker: {kind: consecutive, failures: 1, open_timeout: 1h, per: `+per+`, max_keys: `+maxKeys+`}
    budget: {kind: ratio, per: `+per+`, max_keys: `+maxKeys+`}
  l:
    limiter: {kind: sre, per: `+per+`, max_keys: `+maxKeys+`}
  h:
    max_attempts: 2
    hedge: {adaptive: {}, per: `+per+`, max_keys: `+maxKeys+`}
`)
}

// TestPerChangeStartsFreshMembers: a reload that changes only per (host
// to method) builds groups with no member of the old ones, whose keys no
// call of the new policy carries: the old open breakers used to be kept
// under their host keys, filling the new group so that every method key
// got the shared overflow breaker. A reload that keeps per and changes
// max_keys still keeps the surviving keys' members.
func TestPerChangeStartsFreshMembers(t *testing.T) {
	r := NewRegistry(Options{Logger: discard, Clock: clocktest.NewFake()})
	defer r.Close()
	if err := r.Apply(perFile(t, "host", "2")); err != nil {
		t.Fatal(err)
	}
	p, l, h := r.Policy("p"), r.Policy("l"), r.Policy("h")
	boom := errors.New("boom")
	for _, host := range []string{"https://a:443", "https://b:443"} {
		ctx := kg.WithKey(context.Background(), host)
		retry.Run(ctx, p.Policy(), func(context.Context) error { return boom })
		p.Policy().Budget.(*kg.Budgets).Get(host)
		l.Policy().Limiter.(*kg.Limiters).Get(host)
		h.Hedger().Adaptives.Get(host)
	}
	oldA := p.Policy().Breaker.(*kg.Breakers).Get("https://a:443")
	if oldA.State() != breaker.Open {
		t.Fatalf("host a's breaker %v after a failure", oldA.State())
	}

	// Same per, another max_keys: the members are taken over.
	if err := r.Apply(perFile(t, "host", "3")); err != nil {
		t.Fatal(err)
	}
	if b := p.Policy().Breaker.(*kg.Breakers).Get("https://a:443"); b != oldA {
		t.Fatal("a max_keys change with the same per dropped host a's breaker")
	}

	if err := r.Apply(perFile(t, "method", "2")); err != nil {
		t.Fatal(err)
	}
	g := p.Policy().Breaker.(*kg.Breakers)
	var keys []string
	g.Each(func(k string, _ *breaker.Breaker) { keys = append(keys, k) })
	if len(keys) > 0 {
		t.Errorf("after per host->method the breaker group holds host keys %v", keys)
	}
	if m := g.Get("GET https://c:443/v1"); m == g.Overflow() || m.State() != breaker.Closed {
		t.Errorf("a method key got the overflow breaker (%v) or an open one (%v)", m == g.Overflow(), m.State())
	}
	if n := liveKeys(p.Policy().Budget.(*kg.Budgets).Group); n != 0 {
		t.Errorf("the budget group kept %d host keys", n)
	}
	if n := liveKeys(l.Policy().Limiter.(*kg.Limiters).Group); n != 0 {
		t.Errorf("the limiter group kept %d host keys", n)
	}
	if n := liveKeys[*hedge.Adaptive](h.Hedger().Adaptives); n != 0 {
		t.Errorf("the adaptive hedge delays kept %d host keys", n)
	}
}

// liveKeys counts g's live keys.
func liveKeys[M any](g *kg.Group[M]) int {
	n := 0
	g.Each(func(string, M) { n++ })
	return n
}
