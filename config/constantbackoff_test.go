package config

import (
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
