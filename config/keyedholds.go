package config

import (
	"runtime"
	"sync"
	"weak"

	"github.com/stormguard/stormguard/breaker"
)

// breakerHolds counts, for each member of a local per-key breaker group,
// the groups that hold it (a live member, or the default or overflow
// member). A group built by a reload takes the old group's members over
// (adopt), so for a while both hold them: the old one still serves the
// calls in flight, and until the swap the reload may yet be discarded. A
// member is closed (breaker.Breaker.Close: its active probing stops) when
// the last group holding it lets it go (it is removed, or its group is
// closed), exactly once. Members are unique pointers, so one table serves
// every Registry. The table holds them weakly: the entry of a member whose
// groups were never closed (a Registry dropped without Close) goes with
// the member.
var breakerHolds = holdTable{n: map[weak.Pointer[breaker.Breaker]]int{}}

type holdTable struct {
	mu sync.Mutex
	n  map[weak.Pointer[breaker.Breaker]]int
}

// add records b, just built, as held by one group.
func (t *holdTable) add(b *breaker.Breaker) {
	w := weak.Make(b)
	t.mu.Lock()
	t.n[w]++
	t.mu.Unlock()
	runtime.AddCleanup(b, t.forget, w)
}

// forget removes the entry of a member that is gone.
func (t *holdTable) forget(w weak.Pointer[breaker.Breaker]) {
	t.mu.Lock()
	delete(t.n, w)
	t.mu.Unlock()
}

// take records one more group holding b, unless b is held by none (it
// has been closed): then it reports false, and b must not be used.
func (t *holdTable) take(b *breaker.Breaker) bool {
	w := weak.Make(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[w] == 0 {
		return false
	}
	t.n[w]++
	return true
}

// drop records that a group let b go, and closes b if no group holds it
// any more.
func (t *holdTable) drop(b *breaker.Breaker) {
	w := weak.Make(b)
	t.mu.Lock()
	n := t.n[w] - 1
	if n > 0 {
		t.n[w] = n
	} else {
		delete(t.n, w)
	}
	t.mu.Unlock()
	if n == 0 {
		b.Close()
	}
}

// held returns how many groups hold b.
func (t *holdTable) held(b *breaker.Breaker) int {
	w := weak.Make(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[w]
}
