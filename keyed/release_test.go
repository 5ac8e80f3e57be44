package keyed_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// releasing is a group of members that record their release.
type releasing struct {
	g        *keyed.Group[*member]
	released map[*member]int
	keys     []string
}

func newReleasing(t *testing.T, cfg keyed.Config, keep func(*member, bool) bool) *releasing {
	t.Helper()
	r := &releasing{released: map[*member]int{}}
	g, err := keyed.NewWithRelease(cfg, func(k string) *member { return &member{key: k} }, keep,
		func(k string, m *member) {
			if k != m.key {
				t.Errorf("released %q's member under the key %q", m.key, k)
			}
			r.released[m]++
			r.keys = append(r.keys, k)
		})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	return r
}

// TestEvictedMemberReleased: a member removed to make room is released
// once, outside the lock (release uses the group).
func TestEvictedMemberReleased(t *testing.T) {
	var g *keyed.Group[*member]
	released := map[string]int{}
	g, err := keyed.NewWithRelease(keyed.Config{MaxKeys: 2, Clock: clocktest.NewFake()},
		func(k string) *member { return &member{key: k} }, nil,
		func(k string, _ *member) { released[k]++; g.Len() }) // would deadlock under the lock
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	g.Get("b")
	g.Get("c")
	if s := g.Stats(); s.Evictions != 1 || len(released) != 1 || released["a"]+released["b"] != 1 {
		t.Fatalf("stats %+v, released %v; want one eviction, released once", s, released)
	}
}

// TestIdleMemberReleased: a member removed after Idle is released, by
// Sweep and by the housekeeping of a new key's Get.
func TestIdleMemberReleased(t *testing.T) {
	clk := clocktest.NewFake()
	r := newReleasing(t, keyed.Config{Idle: time.Minute, Clock: clk}, nil)
	a, b := r.g.Get("a"), r.g.Get("b")
	for range 8 { // housekeeping every quarter of Idle, as a busy group's
		clk.Advance(15 * time.Second)
		r.g.Sweep()
	}
	if r.released[a] != 1 || r.released[b] != 1 || r.g.Len() != 0 {
		t.Fatalf("released %v, Len %d; want a and b released once", r.released, r.g.Len())
	}
	c := r.g.Get("c")
	for i := range 8 {
		clk.Advance(15 * time.Second)
		r.g.Get("n" + string(rune('0'+i))) // a new key's housekeeping
	}
	if r.released[c] != 1 {
		t.Fatalf("c released %d times by new keys' housekeeping, want 1", r.released[c])
	}
}

// TestCloseReleasesEveryMember: Close releases every live member, kept
// ones included, and the default and overflow members, each once; the
// closed group builds nothing more.
func TestCloseReleasesEveryMember(t *testing.T) {
	clk := clocktest.NewFake()
	keepA := func(m *member, _ bool) bool { return m.key == "a" }
	r := newReleasing(t, keyed.Config{MaxKeys: 2, Clock: clk}, keepA)
	a, b := r.g.Get("a"), r.g.Get("b")
	r.g.Sweep() // a moves to the kept ring
	if s := r.g.Stats(); s.Kept != 1 {
		t.Fatalf("stats %+v, want a kept", s)
	}
	r.g.Close()
	r.g.Close()
	for _, m := range []*member{a, b, r.g.Default(), r.g.Overflow()} {
		if r.released[m] != 1 {
			t.Fatalf("%q's member released %d times, want 1 (released %v)", m.key, r.released[m], r.keys)
		}
	}
	if len(r.released) != 4 {
		t.Fatalf("released %d members, want 4", len(r.released))
	}
	if m := r.g.Get("e"); m != r.g.Default() || r.g.Len() != 0 {
		t.Fatal("a closed group built a member")
	}
	if m := r.g.Get("a"); m != r.g.Default() {
		t.Fatal("a closed group still hands out a released member")
	}
}

// TestReleasePanicReleasesTheOthers: a release that panics does not stop
// the others, and the first panic goes on to the caller of Close.
func TestReleasePanicReleasesTheOthers(t *testing.T) {
	var released []string
	g, err := keyed.NewWithRelease(keyed.Config{Clock: clocktest.NewFake()},
		func(k string) *member { return &member{key: k} }, nil,
		func(k string, _ *member) {
			released = append(released, k)
			if k == "a" {
				panic("release of a")
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	g.Get("b")
	func() {
		defer func() {
			if v := recover(); v != "release of a" {
				t.Fatalf("recovered %v, want the release's panic", v)
			}
		}()
		g.Close()
	}()
	slices.Sort(released)
	if !slices.Equal(released, []string{"", "", "a", "b"}) {
		t.Fatalf("released %q, want every member", released)
	}
}

// TestBuildPanicReleasesEvicted: a build that panics goes on to the
// caller of Get, and the member evicted to make room for it is released
// all the same; the group keeps working.
func TestBuildPanicReleasesEvicted(t *testing.T) {
	released := 0
	g, err := keyed.NewWithRelease(keyed.Config{MaxKeys: 1, Clock: clocktest.NewFake()},
		func(k string) *member {
			if k == "boom" {
				panic("build")
			}
			return &member{key: k}
		}, nil, func(string, *member) { released++ })
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	func() {
		defer func() { _ = recover() }()
		g.Get("boom")
		t.Fatal("no panic")
	}()
	if released != 1 {
		t.Fatalf("released %d, want the evicted a", released)
	}
	if m := g.Get("c"); m.key != "c" || g.Len() != 1 {
		t.Fatalf("after the panic: %+v, Len %d", m, g.Len())
	}
}

// TestKeepPanicLeavesGroupUsable: a keep that panics goes on to the
// caller, and the group is left consistent.
func TestKeepPanicLeavesGroupUsable(t *testing.T) {
	boom := true
	g, err := keyed.New(keyed.Config{MaxKeys: 1, Clock: clocktest.NewFake()},
		func(k string) *member { return &member{key: k} },
		func(*member, bool) bool {
			if boom {
				panic("keep")
			}
			return false
		})
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	func() {
		defer func() { _ = recover() }()
		g.Get("b")
	}()
	boom = false
	if m := g.Get("b"); m.key != "b" || g.Len() != 1 {
		t.Fatalf("%+v, Len %d", m, g.Len())
	}
}

// TestEveryBuiltMemberReleasedOnce: under concurrent Gets of churning
// keys, Sweeps and a Close among them, every member the group built is
// released exactly once, and a closed group builds none.
func TestEveryBuiltMemberReleasedOnce(t *testing.T) {
	clk := clocktest.NewFake()
	var mu sync.Mutex
	built, released := map[*member]bool{}, map[*member]int{}
	g, err := keyed.NewWithRelease(keyed.Config{MaxKeys: 16, Idle: time.Second, Clock: clk},
		func(k string) *member {
			m := &member{key: k}
			built[m] = true // under the group's lock
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
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				g.Get(strconv.Itoa((i*7 + w) % 100))
				if i%200 == 0 {
					clk.Advance(300 * time.Millisecond)
					g.Sweep()
				}
			}
		})
	}
	wg.Go(func() {
		for range 500 {
			g.Get("closer")
		}
		g.Close() // while the others still churn
	})
	wg.Wait()
	g.Close()
	g.Get("after")
	g.Sweep()
	mu.Lock()
	defer mu.Unlock()
	for m := range built {
		if released[m] != 1 {
			t.Fatalf("%q's member released %d times", m.key, released[m])
		}
	}
	if len(released) != len(built) {
		t.Fatalf("%d released, %d built", len(released), len(built))
	}
}

// TestBuildPanicNotHiddenByReleasePanic: when a Get evicts a member and
// then its build panics, releasing the evicted member runs while that
// panic goes on; a release that panics too must not replace it, or the
// caller recovers the wrong cause.
func TestBuildPanicNotHiddenByReleasePanic(t *testing.T) {
	released := 0
	g, err := keyed.NewWithRelease(keyed.Config{MaxKeys: 1, Clock: clocktest.NewFake()},
		func(k string) *member {
			if k == "boom" {
				panic("build")
			}
			return &member{key: k}
		}, nil, func(string, *member) { released++; panic("release") })
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	got := func() (v any) {
		defer func() { v = recover() }()
		g.Get("boom")
		return nil
	}()
	if got != "build" {
		t.Fatalf("recovered %v, want the build panic", got)
	}
	if released != 1 {
		t.Fatalf("released %d, want the evicted a", released)
	}
}

// panicNowClock is a clock whose Now panics.
type panicNowClock struct{ *clocktest.Fake }

func (panicNowClock) Now() time.Time { panic("clock bug") }

// TestNewPanicReleasesBuiltMembers (sweep, callback panics): when New
// panics (its Clock, or the build of the overflow member), no member it
// built is left unreleased: the Clock is read before any build, and the
// default member is released if the overflow member's build panics. The
// panic goes on to New's caller.
func TestNewPanicReleasesBuiltMembers(t *testing.T) {
	built, released := 0, 0
	build := func(string) *member { built++; return &member{} }
	release := func(string, *member) { released++ }
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the Clock's panic did not go on")
			}
		}()
		keyed.NewWithRelease(keyed.Config{Clock: panicNowClock{clocktest.NewFake()}}, build, nil, release)
	}()
	if built != released {
		t.Fatalf("Clock panic: built %d members, released %d", built, released)
	}
	built, released = 0, 0
	second := func(k string) *member {
		if built++; built == 2 {
			panic("build bug")
		}
		return &member{}
	}
	func() {
		defer func() {
			if v := recover(); v != "build bug" {
				t.Fatalf("recovered %v, want the build's panic", v)
			}
		}()
		keyed.NewWithRelease(keyed.Config{Clock: clocktest.NewFake()}, second, nil, func(string, *member) { released++; panic("release bug") })
	}()
	if released != 1 {
		t.Fatalf("build panic: released %d members, want 1 (the default member)", released)
	}
}
