package redisstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/config"
)

const fleetFile = `policies:
  pay:
    max_attempts: %d
    breaker: {kind: consecutive, failures: %d, open_timeout: 10m, open_jitter: 0, shared: redis}
    budget: {kind: ratio, max_tokens: 10, shared: redis}
`

// TestFleetFromPolicyFile (issue #32 item 13): a policy file whose breaker
// and budget say shared: redis gives every process (here two registries,
// each with its own Redis client) the fleet's breaker and budget through
// Store; a failure run in one process opens the breaker for the other; a
// reload keeps the fleet state, whether it keeps the part (settings
// unchanged) or builds a new one under the same name (settings changed).
func TestFleetFromPolicyFile(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(attempts, failures int) {
		t.Helper()
		if err := os.WriteFile(path, fmt.Appendf(nil, fleetFile, attempts, failures), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(3, 2)
	open := func() *config.Registry {
		t.Helper()
		st := &Store{Client: newClient(t, srv.addr), Namespace: ns, RefreshInterval: 20 * time.Millisecond, Timeout: 2 * time.Second}
		reg, err := config.Open(path, config.Options{Shared: map[string]config.SharedStore{"redis": st}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		return reg
	}
	a, b := open(), open()
	ha, hb := a.Policy("pay"), b.Policy("pay")
	brA, ok := ha.Policy().Breaker.(*Breaker)
	if !ok {
		t.Fatalf("breaker %T, want a shared *redisstore.Breaker", ha.Policy().Breaker)
	}
	brB := hb.Policy().Breaker.(*Breaker)
	buA, ok := ha.Policy().Budget.(*Budget)
	if !ok {
		t.Fatalf("budget %T, want a shared *redisstore.Budget", ha.Policy().Budget)
	}
	waitFor(t, "both breakers joined", func() bool { return brA.Stats().Syncs >= 1 && brB.Stats().Syncs >= 1 })
	for range 2 {
		done, err := brA.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errors.New("downstream failed"))
	}
	waitFor(t, "process B sees the fleet's breaker open", func() bool { return brB.State() == breaker.Open })

	// A reload that leaves the breaker and budget alone keeps them.
	write(4, 2)
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	if ha.Policy().MaxAttempts != 4 || ha.Policy().Breaker != brA || ha.Policy().Budget != buA {
		t.Fatal("an unrelated reload rebuilt the shared parts")
	}
	if brA.State() != breaker.Open {
		t.Fatalf("after the reload: %v, want the fleet's open state", brA.State())
	}
	// A reload that changes the breaker builds a new one under the same
	// name, which joins the fleet's state: still open.
	write(4, 3)
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	nb, ok := ha.Policy().Breaker.(*Breaker)
	if !ok || nb == brA {
		t.Fatal("changed breaker settings did not build a new shared breaker")
	}
	waitFor(t, "the new breaker joined", func() bool { return nb.Stats().Syncs >= 1 })
	if nb.State() != breaker.Open {
		t.Fatalf("new breaker after the reload: %v, want the fleet's open state", nb.State())
	}
	if _, err := nb.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("new breaker admits a call (%v) while the fleet's is open", err)
	}
}

// TestStoreRefusalRejectsFile: a breaker Redis cannot run (a count window)
// refuses the file with the field named, and nothing is left running.
func TestStoreRefusalRejectsFile(t *testing.T) {
	srv := sharedRedis(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	os.WriteFile(path, []byte("policies: {pay: {breaker: {kind: count_window, calls: 10, shared: redis}, budget: {kind: ratio, shared: redis}}}\n"), 0o644)
	st := &Store{Client: newClient(t, srv.addr), Namespace: namespace(t)}
	_, err := config.Open(path, config.Options{Shared: map[string]config.SharedStore{"redis": st}})
	var fe *config.Error
	if !errors.As(err, &fe) || len(fe.Problems) != 1 || fe.Problems[0].Path != "policies.pay.breaker" {
		t.Fatalf("got %v, want the breaker refused by the store", err)
	}
}

var _ config.KeyedSharedStore = (*Store)(nil)

const keyedFleetFile = `policies:
  hooks:
    max_attempts: %d
    breaker: {kind: consecutive, failures: 2, open_timeout: 10m, open_jitter: 0, shared: redis, per: host, max_keys: 100}
    budget: {kind: ratio, max_tokens: 10, shared: redis, per: host}
`

// TestKeyedFleetFromPolicyFile (issue #37 item 4): shared: redis with
// per: host gives every process (two registries, each with its own
// client) a shared breaker per host: a run of failures to host A in one
// process opens A in the other, and B stays closed in both; a reload
// that leaves the block alone keeps the group, keys and all.
func TestKeyedFleetFromPolicyFile(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(attempts int) {
		t.Helper()
		if err := os.WriteFile(path, fmt.Appendf(nil, keyedFleetFile, attempts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	open := func() *config.Registry {
		t.Helper()
		st := &Store{Client: newClient(t, srv.addr), Namespace: ns, RefreshInterval: 20 * time.Millisecond, Timeout: 2 * time.Second}
		reg, err := config.Open(path, config.Options{Shared: map[string]config.SharedStore{"redis": st}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		return reg
	}
	a, b := open(), open()
	ha, hb := a.Policy("hooks"), b.Policy("hooks")
	ga, ok := ha.Policy().Breaker.(*KeyedBreakers)
	if !ok {
		t.Fatalf("breaker %T, want *redisstore.KeyedBreakers", ha.Policy().Breaker)
	}
	gb := hb.Policy().Breaker.(*KeyedBreakers)
	if _, ok := ha.Policy().Budget.(*KeyedBudgets); !ok {
		t.Fatalf("budget %T, want *redisstore.KeyedBudgets", ha.Policy().Budget)
	}
	aA, aB, bA, bB := ga.Get("https://a:443"), ga.Get("https://b:443"), gb.Get("https://a:443"), gb.Get("https://b:443")
	for _, m := range []*Breaker{aA, aB, bA, bB} {
		mustSync(t, m)
	}
	for range 2 {
		if err := call(aA, errDown); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, aA)
	mustSync(t, bA)
	mustSync(t, bB)
	wantState(t, bA, breaker.Open)
	wantState(t, bB, breaker.Closed)
	wantState(t, aB, breaker.Closed)

	write(4)
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	if ha.Policy().MaxAttempts != 4 || ha.Policy().Breaker != ga || ga.Get("https://a:443") != aA {
		t.Fatal("an unrelated reload rebuilt the keyed shared breaker")
	}
}
