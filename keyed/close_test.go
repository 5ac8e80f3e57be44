package keyed_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// TestCloseRacingNewKeysReleasesEveryBuiltMember (review): Gets of new
// keys racing Close never leave a member built and not released: every
// member built (before Close, as Close cannot interleave with a build) is
// released exactly once, and once Close has returned every Get and For
// gives the default member and builds nothing.
func TestCloseRacingNewKeysReleasesEveryBuiltMember(t *testing.T) {
	for round := range 20 {
		var mu sync.Mutex
		built := map[*member]bool{}
		released := map[*member]int{}
		var closed atomic.Bool
		var lateBuilds atomic.Int64
		g, err := keyed.NewWithRelease(keyed.Config{MaxKeys: 64, Clock: clocktest.NewFake()},
			func(k string) *member {
				if closed.Load() {
					lateBuilds.Add(1)
				}
				m := &member{key: k}
				mu.Lock()
				built[m] = true
				mu.Unlock()
				return m
			}, nil,
			func(_ string, m *member) {
				mu.Lock()
				released[m]++
				mu.Unlock()
			})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range 4 {
			wg.Go(func() {
				<-start
				for i := range 200 {
					key := strconv.Itoa(round) + "/" + strconv.Itoa(w) + "/" + strconv.Itoa(i)
					wasClosed := closed.Load() // a Get that began before Close returned may get a member
					m := g.Get(key)
					if wasClosed && m != g.Default() {
						t.Errorf("Get(%q) after Close returned a member that is not the default", key)
					}
					g.For(keyed.WithKey(t.Context(), key+"/ctx"))
				}
			})
		}
		close(start)
		g.Close()
		closed.Store(true)
		wg.Wait()
		if n := lateBuilds.Load(); n != 0 {
			t.Fatalf("round %d: %d members built after Close returned", round, n)
		}
		mu.Lock()
		for m := range built {
			if released[m] != 1 {
				t.Fatalf("round %d: member of %q released %d times, want 1", round, m.key, released[m])
			}
		}
		if len(released) != len(built) {
			t.Fatalf("round %d: released %d members, built %d", round, len(released), len(built))
		}
		mu.Unlock()
		if g.Len() != 0 {
			t.Fatalf("round %d: %d live members after Close", round, g.Len())
		}
	}
}
