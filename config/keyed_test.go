package config

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// TestKeyedBlocksParse: per, max_keys and idle on a breaker, budget,
// limiter, nested budget and hedge are read into their KeySpec.
func TestKeyedBlocksParse(t *testing.T) {
	f := mustParse(t, `
policies:
  a:
    breaker: {kind: consecutive, failures: 2, per: host, max_keys: 50, idle: 2m}
    budget: {kind: ratio, per: host}
    nested: {rule: budget, budget: {kind: ratio, per: host, max_keys: 7}}
  b:
    limiter: {kind: sre, per: method, idle: 30s}
  c:
    hedge: {adaptive: {}, per: host, max_keys: 10}
    breaker: {kind: consecutive, per: none}
`)
	a, b, c := f.Policies["a"], f.Policies["b"], f.Policies["c"]
	if k := a.Breaker.Keys; k == nil || *k != (KeySpec{Per: PerHost, MaxKeys: 50, Idle: 2 * time.Minute}) {
		t.Errorf("a.breaker keys %+v", k)
	}
	if k := a.Budget.Keys; k == nil || *k != (KeySpec{Per: PerHost}) {
		t.Errorf("a.budget keys %+v", k)
	}
	if k := a.Nested.Budget.Keys; k == nil || k.MaxKeys != 7 {
		t.Errorf("a.nested.budget keys %+v", k)
	}
	if k := b.Limiter.Keys; k == nil || *k != (KeySpec{Per: PerMethod, Idle: 30 * time.Second}) {
		t.Errorf("b.limiter keys %+v", k)
	}
	if k := c.Hedge.Keys; k == nil || k.MaxKeys != 10 {
		t.Errorf("c.hedge keys %+v", k)
	}
	if c.Breaker.Keys != nil {
		t.Errorf("per: none gave keys %+v", c.Breaker.Keys)
	}
	if a.KeyPer() != PerHost || b.KeyPer() != PerMethod || c.KeyPer() != PerHost {
		t.Errorf("KeyPer: %q %q %q", a.KeyPer(), b.KeyPer(), c.KeyPer())
	}
}

// TestKeyedAbsurdSizesRefused (#37 bad input): max_keys 0, negative or
// over ten million, and an idle of zero or beyond MaxDuration, are
// refused with the file, line, field and limit.
func TestKeyedAbsurdSizesRefused(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"max_keys: 0", "test.yaml:4: policies.a.breaker.max_keys: 0 keys isolate nothing"},
		{"max_keys: -3", "test.yaml:4: policies.a.breaker.max_keys: -3 is outside [1, 10000000]"},
		{"max_keys: 10000001", "test.yaml:4: policies.a.breaker.max_keys: 10000001 is outside [1, 10000000]"},
		{"max_keys: lots", `policies.a.breaker.max_keys: "lots" is not a whole number`},
		{"idle: 25h", `test.yaml:4: policies.a.breaker.idle: "25h" is above the limit of 24h`},
		{"idle: 0", "test.yaml:4: policies.a.breaker.idle: must be positive (leave idle out for the default, 5m)"},
		{"idle: -1s", `policies.a.breaker.idle: "-1s" must not be negative`},
	} {
		src := "policies:\n  a:\n    breaker:\n      {kind: consecutive, per: host, " + tc.block + "}\n"
		_, err := Parse("test.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.block, err, tc.want)
		}
	}
}

// TestKeyedFormsRefused: what cannot be honoured is refused, each with
// its field: sizes without a key, an unknown per, keyed parts of one
// policy keyed by different things (they share the call's one key), and
// a fixed hedge delay per key. (A shared part per key is refused when it
// is built, by a store that cannot: TestKeyedSharedNeedsKeyedStore.)
func TestKeyedFormsRefused(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"breaker: {kind: consecutive, max_keys: 5}", "policies.a.breaker.max_keys: applies only with per: host or per: method"},
		{"breaker: {kind: consecutive, per: none, idle: 1m}", "policies.a.breaker.idle: applies only with per: host or per: method"},
		{"breaker: {kind: consecutive, per: url}", `policies.a.breaker.per: "url" is not one of host, method, none`},
		{"{breaker: {kind: consecutive, per: host}, budget: {kind: ratio, per: method}}", "policies.a.budget.per: method differs from policies.a.breaker.per: host"},
		{"hedge: {delay: 10ms, per: host}", "policies.a.hedge.per: a fixed delay is the same for every key"},
	} {
		pol := tc.policy
		if !strings.HasPrefix(pol, "{") {
			pol = "{" + pol + "}"
		}
		_, err := Parse("test.yaml", []byte("policies:\n  a: "+pol+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.policy, err, tc.want)
		}
	}
}

const keyedFile = `policies:
  p:
    max_attempts: %s
    breaker: {kind: consecutive, failures: %s, open_timeout: 1m, per: host, max_keys: %s}
    budget: {kind: ratio, per: host}
`

func writeKeyed(t *testing.T, path, attempts, failures, maxKeys string) {
	t.Helper()
	s := keyedFile
	for _, v := range []string{attempts, failures, maxKeys} {
		s = strings.Replace(s, "%s", v, 1)
	}
	writeFile(t, path, s)
}

var errDown = errors.New("down")

// fail makes one call of h's policy under key that fails.
func failCall(t *testing.T, h *Handle, key string) {
	t.Helper()
	ctx := kg.WithKey(context.Background(), key)
	retry.Run(ctx, h.Policy(), func(context.Context) error { return errDown })
}

// breakerOf returns the member breaker of key in h's policy.
func breakerOf(t *testing.T, h *Handle, key string) *breaker.Breaker {
	t.Helper()
	g, ok := h.Policy().Breaker.(*kg.Breakers)
	if !ok {
		t.Fatalf("breaker is %T, not a keyed group", h.Policy().Breaker)
	}
	return g.Get(key)
}

// TestKeyedRegistryIsolatesAndReloadKeepsKeys (#37 item 3): a file's
// per: host breaker is a keyed group (one host's failures open only its
// breaker), and through real reloads of the file: an unrelated change
// keeps the group whole; a change of max_keys alone builds a new group
// in which the surviving keys keep their members and state; a change of
// the breaker's own settings starts every key afresh.
func TestKeyedRegistryIsolatesAndReloadKeepsKeys(t *testing.T) {
	clk := clocktest.NewFake()
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeKeyed(t, path, "1", "2", "100")
	reg, err := Open(path, Options{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Policy("p")
	failCall(t, h, "https://bad:443")
	failCall(t, h, "https://bad:443")
	if s := breakerOf(t, h, "https://bad:443").State(); s != breaker.Open {
		t.Fatalf("bad host's breaker %v after two failures", s)
	}
	if s := breakerOf(t, h, "https://good:443").State(); s != breaker.Closed {
		t.Fatalf("good host's breaker %v: one host's failures reached another", s)
	}
	if _, ok := h.Policy().Budget.(*kg.Budgets); !ok {
		t.Fatalf("budget is %T, not a keyed group", h.Policy().Budget)
	}
	group := h.Policy().Breaker

	writeKeyed(t, path, "2", "2", "100") // unrelated change
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Policy().MaxAttempts != 2 || h.Policy().Breaker != group {
		t.Fatalf("an unrelated change replaced the group (attempts %d)", h.Policy().MaxAttempts)
	}

	old := breakerOf(t, h, "https://bad:443")
	writeKeyed(t, path, "2", "2", "200") // max_keys only
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Breaker == group {
		t.Fatal("max_keys changed but the group was kept")
	}
	if b := breakerOf(t, h, "https://bad:443"); b != old || b.State() != breaker.Open {
		t.Fatalf("a surviving key lost its breaker (same %v, state %v)", b == old, b.State())
	}
	if _, err := breakerOf(t, h, "https://bad:443").Allow(); err == nil {
		t.Fatal("the kept open breaker admitted a call")
	}

	writeKeyed(t, path, "2", "3", "200") // the breaker's own settings
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if s := breakerOf(t, h, "https://bad:443").State(); s != breaker.Closed {
		t.Fatalf("new breaker settings kept the old member (state %v)", s)
	}
}

// TestKeyedUnkeyedToKeyed: a reload that splits a shared breaker per key
// installs a group, and one that joins it again installs a plain breaker.
func TestKeyedUnkeyedToKeyed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, "policies:\n  p: {breaker: {kind: consecutive}}\n")
	reg, err := Open(path, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Policy("p")
	if _, ok := h.Policy().Breaker.(*breaker.Breaker); !ok {
		t.Fatalf("unkeyed breaker is %T", h.Policy().Breaker)
	}
	writeFile(t, path, "policies:\n  p: {breaker: {kind: consecutive, per: method}}\n")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Policy().Breaker.(*kg.Breakers); !ok || h.KeyPer() != PerMethod {
		t.Fatalf("keyed breaker is %T, per %q", h.Policy().Breaker, h.KeyPer())
	}
	writeFile(t, path, "policies:\n  p: {breaker: {kind: consecutive}}\n")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Policy().Breaker.(*breaker.Breaker); !ok || h.KeyPer() != "" {
		t.Fatalf("unkeyed again: %T, per %q", h.Policy().Breaker, h.KeyPer())
	}
}

// TestKeyedLimiterAndHedge: a limiter per key is a keyed.Limiters, and a
// hedge per key gives the Hedger one Adaptive delay per key, kept across
// a reload that leaves the hedge settings unchanged.
func TestKeyedLimiterAndHedge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	src := "policies:\n  l: {limiter: {kind: sre, per: host}}\n  h: {max_attempts: %s, hedge: {adaptive: {}, per: host, max_keys: 5}}\n"
	writeFile(t, path, strings.Replace(src, "%s", "3", 1))
	reg, err := Open(path, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, ok := reg.Policy("l").Policy().Limiter.(*kg.Limiters); !ok {
		t.Fatalf("limiter is %T", reg.Policy("l").Policy().Limiter)
	}
	hd := reg.Policy("h").Hedger()
	if hd.Adaptives == nil || hd.Adaptive != nil {
		t.Fatalf("hedger per key: Adaptives %v, Adaptive %v", hd.Adaptives, hd.Adaptive)
	}
	a := hd.Adaptives.Get("x")
	writeFile(t, path, strings.Replace(src, "%s", "4", 1))
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	hd2 := reg.Policy("h").Hedger()
	if hd2.Adaptives != hd.Adaptives || hd2.Adaptives.Get("x") != a {
		t.Fatal("a reload that kept the hedge settings lost the per-key delays")
	}
}

// TestHandleHTTPKey: a handle gives the key of a request by its policy's
// per: the host (scheme, host, port) for per: host, the method, host and
// path (no query) for per: method, following reloads.
func TestHandleHTTPKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, "policies:\n  p: {breaker: {kind: consecutive, per: host}}\n")
	reg, err := Open(path, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Policy("p")
	req, _ := http.NewRequest("POST", "https://API.example.com/v1/charges?id=7", nil)
	if k := h.HTTPKey(req); k != "https://api.example.com:443" {
		t.Fatalf("per host: %q", k)
	}
	writeFile(t, path, "policies:\n  p: {breaker: {kind: consecutive, per: method}}\n")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if k := h.HTTPKey(req); k != "POST https://api.example.com:443/v1/charges" {
		t.Fatalf("per method: %q", k)
	}
	if k := HTTPMethodKey(&http.Request{Method: "GET"}); k != "GET" {
		t.Fatalf("no URL: %q", k)
	}
}
