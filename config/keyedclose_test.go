package config

import (
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// groupOf returns h's keyed breaker group.
func groupOf(t *testing.T, h *Handle) *kg.Breakers {
	t.Helper()
	g, ok := h.Policy().Breaker.(*kg.Breakers)
	if !ok {
		t.Fatalf("breaker is %T, not a keyed group", h.Policy().Breaker)
	}
	return g
}

// checkClosed fails unless g is closed (it holds no member and builds
// none) and every member of ms has been let go by every group (closed).
func checkClosed(t *testing.T, what string, g *kg.Breakers, ms ...*breaker.Breaker) {
	t.Helper()
	if n := g.Len(); n != 0 {
		t.Errorf("%s: the dropped group still holds %d members", what, n)
	}
	if m := g.Get("https://brand-new:443"); m != g.Default() {
		t.Errorf("%s: the dropped group built a member for a new key", what)
	}
	for _, m := range ms {
		if n := breakerHolds.held(m); n != 0 {
			t.Errorf("%s: a dropped member is still held by %d groups (never closed)", what, n)
		}
	}
}

// TestDroppedLocalKeyedBreakerGroupIsClosed (review): a reload that
// replaces or removes a local per-key breaker block closes the group it
// drops, after the swap, and closes (breaker.Breaker.Close) each of its
// members exactly when no group in force holds it: members a new group
// took over stay open, and a member an in-flight call holds stays
// usable. (Before: the dropped group was never closed, and its members
// never let go.)
func TestDroppedLocalKeyedBreakerGroupIsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeKeyed(t, path, "1", "2", "100")
	reg, err := Open(path, Options{Clock: clocktest.NewFake(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Policy("p")
	failCall(t, h, "https://bad:443")
	failCall(t, h, "https://bad:443")
	g1 := groupOf(t, h)
	bad, good := g1.Get("https://bad:443"), g1.Get("https://good:443")
	def1, over1 := g1.Default(), g1.Overflow()

	// max_keys only: the new group takes every member over; the old one
	// is closed but its members are the new group's and stay open.
	writeKeyed(t, path, "1", "2", "200")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	g2 := groupOf(t, h)
	checkClosed(t, "max_keys change", g1)
	for _, m := range []*breaker.Breaker{bad, good, def1, over1} {
		if n := breakerHolds.held(m); n != 1 {
			t.Errorf("max_keys change: a member taken over is held by %d groups, want 1 (the new group)", n)
		}
	}
	if g2.Get("https://bad:443") != bad || bad.State() != breaker.Open {
		t.Fatal("the surviving key lost its open breaker")
	}

	// The breaker's own settings: nothing is taken over, every member of
	// the dropped group is closed, and one an in-flight call got before
	// the reload still serves it.
	inflight := g2.Get("https://good:443")
	writeKeyed(t, path, "1", "3", "200")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, "settings change", g2, bad, good, def1, over1)
	done, err := inflight.Allow()
	if err != nil {
		t.Fatalf("an in-flight call's member refused after its group was dropped: %v", err)
	}
	done(nil)

	// The block removed: the last group is closed with its members.
	g3 := groupOf(t, h)
	m3 := g3.Get("https://x:443")
	writeFile(t, path, "policies:\n  p: {max_attempts: 1}\n")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, "block removed", g3, m3, g3.Default(), g3.Overflow())
}

// TestDiscardedKeyedBreakerGroupLeavesMembersOpen: a reload that is not
// applied (a watch hook panicked) closes the group it built, and with it
// none of the members the group in force still serves.
func TestDiscardedKeyedBreakerGroupLeavesMembersOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeKeyed(t, path, "1", "2", "100")
	var armed atomic.Bool
	reg, err := Open(path, Options{Clock: clocktest.NewFake(), Logger: discard,
		OnBreaker: func(string, retry.Breaker) func() {
			if armed.Load() {
				panic("hook bug")
			}
			return func() {}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Policy("p")
	g1 := groupOf(t, h)
	m := g1.Get("https://a:443")
	writeKeyed(t, path, "1", "2", "200")
	armed.Store(true)
	func() {
		defer func() { recover() }()
		reg.Reload(path)
	}()
	armed.Store(false)
	if groupOf(t, h) != g1 {
		t.Fatal("the failed reload replaced the group")
	}
	for _, b := range []*breaker.Breaker{m, g1.Default(), g1.Overflow()} {
		if n := breakerHolds.held(b); n != 1 {
			t.Errorf("a member of the group in force is held by %d groups, want 1", n)
		}
	}
	reg.Close()
	checkClosed(t, "Registry.Close", g1, m, g1.Default(), g1.Overflow())
}

// TestBreakerHoldsForgetUnclosedMembers: the table of holds keeps no
// member alive: the entry of a member whose group was never closed goes
// once the member is garbage (the test waits for the runtime's cleanups,
// however long they take).
func TestBreakerHoldsForgetUnclosedMembers(t *testing.T) {
	ws := make([]weak.Pointer[breaker.Breaker], 100)
	for i := range ws {
		b := breaker.New(breaker.Config{})
		breakerHolds.add(b)
		ws[i] = weak.Make(b)
	}
	for {
		runtime.GC()
		left := 0
		breakerHolds.mu.Lock()
		for _, w := range ws {
			if _, ok := breakerHolds.n[w]; ok {
				left++
			}
		}
		breakerHolds.mu.Unlock()
		if left == 0 {
			return
		}
		runtime.Gosched()
	}
}

// TestKeyedMembersSurviveTwoReloadsUncalled (sweep, reload state): a key
// not called between two reloads that each change only max_keys keeps
// its budget, limiter, breaker and hedge delay: a new group takes every
// live member of the old one over at once. (Before: budgets, limiters
// and hedge delays were taken over only at their key's next call, so a
// second reload before that call started the key afresh.)
func TestKeyedMembersSurviveTwoReloadsUncalled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	src := func(n string) string {
		return "policies:\n  p: {budget: {kind: ratio, per: host, max_keys: " + n + "}, limiter: {kind: sre, per: host, max_keys: " + n +
			"}, breaker: {kind: consecutive, per: host, max_keys: " + n + "}}\n  q: {hedge: {adaptive: {}, per: host, max_keys: " + n + "}}\n"
	}
	writeFile(t, path, src("100"))
	reg, err := Open(path, Options{Clock: clocktest.NewFake(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	p, q := reg.Policy("p"), reg.Policy("q")
	const key = "https://a:443"
	bud := p.Policy().Budget.(*kg.Budgets).Get(key)
	lim := p.Policy().Limiter.(*kg.Limiters).Get(key)
	brk := p.Policy().Breaker.(*kg.Breakers).Get(key)
	reg.mu.Lock()
	del := q.adaptives.Get(key)
	reg.mu.Unlock()
	for _, n := range []string{"200", "300"} {
		writeFile(t, path, src(n))
		if err := reg.Reload(path); err != nil {
			t.Fatal(err)
		}
	}
	if p.Policy().Budget.(*kg.Budgets).Get(key) != bud {
		t.Error("the budget of a key not called between two reloads was replaced")
	}
	if p.Policy().Limiter.(*kg.Limiters).Get(key) != lim {
		t.Error("the limiter of a key not called between two reloads was replaced")
	}
	if p.Policy().Breaker.(*kg.Breakers).Get(key) != brk {
		t.Error("the breaker of a key not called between two reloads was replaced")
	}
	reg.mu.Lock()
	got := q.adaptives.Get(key)
	reg.mu.Unlock()
	if got != del {
		t.Error("the hedge delay of a key not called between two reloads was replaced")
	}
}
