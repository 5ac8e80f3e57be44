package config

import (
	"strings"
	"testing"
	"time"
)

// TestConstantBackoffWithoutBaseWaitsDefaultBase: a constant backoff
// whose base the file leaves out waits backoff.DefaultBase, as the other
// strategies do without base, instead of retrying at once (in lockstep
// across a fleet); only an explicit base: 0 asks for no wait.
func TestConstantBackoffWithoutBaseWaitsDefaultBase(t *testing.T) {
	f := mustParse(t, `
policies:
  p: {backoff: {strategy: constant, jitter: none}}
  zero: {backoff: {strategy: constant, base: 0}}
  set: {backoff: {strategy: constant, base: 250ms}}
`)
	r := NewRegistry(Options{Logger: discard})
	defer r.Close()
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"p": 100 * time.Millisecond, "zero": 0, "set": 250 * time.Millisecond} {
		b := r.Policy(name).Policy().Backoff
		for n := 1; n <= 3; n++ {
			if d := b.Delay(n, 0); d != want {
				t.Errorf("%s: retry %d waits %v, want %v", name, n, d, want)
			}
		}
	}
}

// TestConstantBackoffMaxBelowDefaultBase: a max below the default base
// of a constant backoff without base is refused, saying the base is the
// default (backoff.New refuses it, and the policy would otherwise get no
// backoff of its own).
func TestConstantBackoffMaxBelowDefaultBase(t *testing.T) {
	_, err := Parse("p.yaml", []byte("policies: {a: {backoff: {strategy: constant, max: 50ms}}}"))
	if err == nil || !strings.Contains(err.Error(), "policies.a.backoff.max: 50ms is below base 100ms (base left out: the default)") {
		t.Fatalf("Parse = %v", err)
	}
}
