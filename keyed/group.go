package keyed

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Group holds one member of type T per key, built on first use by the
// function given to New, and bounded as its Config says (see the package
// documentation). It is safe for concurrent use; Get of a key that has a
// member takes no lock and does not allocate.
//
// A caller that got a member just as it was removed uses it to the end of
// its call; the key's next Get builds a new one.
type Group[T any] struct {
	build   func(key string) T
	keep    func(member T, idle bool) bool
	release func(key string, member T)
	def     T // the empty key's
	over    T // the overflow member
	clk     clock.Clock
	max     int
	idle    time.Duration
	gran    time.Duration // the length of an epoch: a quarter of idle

	tab   atomic.Pointer[table[T]]
	epoch atomic.Uint64 // the current epoch, advanced under mu

	evictions, idles, overflows atomic.Uint64

	mu     sync.Mutex
	tomb   *entry[T]
	hand   *entry[T] // the ring of members that may be removed, at the CLOCK hand
	ringN  int
	pinned *entry[T] // the ring of members kept (keep said so), at the next to recheck
	pinN   int
	times  [epochs]time.Time // the start of the last epochs, at epoch%epochs
	gone   []*entry[T]       // removed members to release once mu is unlocked

	closed atomic.Bool // Close was called: set under mu, read with or without it
}

// epochs is how many epoch starts a group remembers. An entry last used
// further back is idle (see idle).
const epochs = 8

// entry is one member. used is its last epoch of use, shifted left one
// bit, with the CLOCK reference bit in bit 0 (set by Get, cleared as the
// hand passes). prev, next and pinned are under the group's mutex.
type entry[T any] struct {
	key    string
	h      uint64
	m      T
	used   atomic.Uint64
	dead   atomic.Bool
	prev   *entry[T]
	next   *entry[T]
	pinned bool
}

// Stats counts what a group did.
type Stats struct {
	Live      int    // members held (the default and overflow members aside)
	Kept      int    // of them, members kept because they hold state (breakers that refuse calls)
	Evictions uint64 // members removed to make room for a new key
	Idle      uint64 // members removed after Config.Idle unused
	Overflows uint64 // Gets given the overflow member because every member was kept
}

// New returns a group of members built by build, which is called with the
// key under the group's lock (it must not use the group), once for the
// default member and then once for the overflow member at once, with "" as
// key. keep, when not nil, tells whether a member must be kept for the
// state it holds (idle: it has not been used for Config.Idle); a kept
// member is never removed. New refuses a config Validate refuses.
//
// A panic in build or keep goes on to the caller of Get (or Sweep), the
// group unchanged but for the members it had already removed; a panic of
// build or the Clock in New goes on to New's caller, no member built by
// New left unreleased.
func New[T any](cfg Config, build func(key string) T, keep func(member T, idle bool) bool) (*Group[T], error) {
	return NewWithRelease(cfg, build, keep, nil)
}

// NewWithRelease is New with release, when not nil, called with every
// member the group lets go, and its key: a member removed as idle or to
// make room, and at Close every member left, the default and overflow
// members included (with the key ""). Use it for members that hold
// something to stop (goroutines, connections, subscriptions). It is called
// once per member, after the group's lock is released, on the goroutine
// whose Get, Sweep or Close removed the member, so it must be quick (hand
// slow work to a goroutine of its own); it may use the group. A caller that
// got the member just before may still be using it. If release panics the
// group releases the other members it removed all the same, then the first
// panic goes on to that caller.
func NewWithRelease[T any](cfg Config, build func(key string) T, keep func(member T, idle bool) bool, release func(key string, member T)) (*Group[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	g := &Group[T]{
		build: build, keep: keep, release: release,
		clk: cfg.Clock, max: cfg.MaxKeys, idle: cfg.Idle,
		gran: max(cfg.Idle/4, 1), tomb: new(entry[T]),
	}
	g.times[0] = g.clk.Now() // before any build: a Clock that panics leaves no member to release
	g.def = build("")
	g.over = g.buildOverflow()
	g.tab.Store(newTable[T](minSlots))
	return g, nil
}

// buildOverflow builds the overflow member; if build panics, the default
// member is released (a panic of release then is dropped) and build's
// panic goes on.
func (g *Group[T]) buildOverflow() T {
	ok := false
	defer func() {
		if !ok && g.release != nil {
			func() {
				defer func() { recover() }() // build's panic is the one that goes on
				g.release("", g.def)
			}()
		}
	}()
	m := g.build("")
	ok = true
	return m
}

// Default returns the empty key's member.
func (g *Group[T]) Default() T { return g.def }

// Overflow returns the member shared by the keys that found the group full
// of kept members.
func (g *Group[T]) Overflow() T { return g.over }

// Get returns key's member, building it if key has none: the default
// member for "", the overflow member when the group is full of kept
// members. After Close it builds nothing and returns the default member.
func (g *Group[T]) Get(key string) T {
	if key == "" {
		return g.def
	}
	return g.get(hashKey(key), key)
}

// For returns the member of the key WithKey put in ctx (KeyFrom), as Get
// does, without hashing the key again: WithKey hashed it once for every
// group the call uses. A ctx without a key gives the default member.
func (g *Group[T]) For(ctx context.Context) T {
	c := keyOf(ctx)
	if c == nil || c.key == "" {
		return g.def
	}
	return g.get(c.h, c.key)
}

// get is Get of key, whose hash is h.
func (g *Group[T]) get(h uint64, key string) T {
	if e := g.tab.Load().find(h, key); e != nil && !e.dead.Load() {
		e.touch(g.epoch.Load())
		return e.m
	}
	return g.slow(h, key)
}

// seed hashes the keys of every group of the process, so that WithKey
// hashes a call's key once for all of them.
var seed = maphash.MakeSeed()

func hashKey(key string) uint64 { return maphash.String(seed, key) }

// touch records a use in epoch ep: the reference bit and, unless a later
// one is recorded, the epoch.
func (e *entry[T]) touch(ep uint64) {
	want := ep<<1 | 1
	for {
		v := e.used.Load()
		if v >= want || e.used.CompareAndSwap(v, want) {
			return
		}
	}
}

// slow is Get for a key not found without the lock. A closed group
// answers without the lock: it builds nothing, and Close emptied its
// table, so every key but a member's just removed comes here.
func (g *Group[T]) slow(h uint64, key string) T {
	if g.closed.Load() {
		return g.def
	}
	g.mu.Lock()
	done := false
	defer func() { g.unlock(done) }()
	m := g.slowLocked(h, key)
	done = true
	return m
}

// slowLocked is slow with the group's mutex held.
func (g *Group[T]) slowLocked(h uint64, key string) T {
	if g.closed.Load() { // Close ran since slow looked
		return g.def
	}
	now := g.clk.Now()
	g.advance(now)
	t := g.tab.Load()
	if e := t.find(h, key); e != nil {
		e.touch(g.epoch.Load())
		return e.m
	}
	g.recheck(now, 2)
	g.sweep(now, 2)
	if g.ringN+g.pinN >= g.max && !g.evict(now) {
		g.overflows.Add(1)
		return g.over
	}
	e := &entry[T]{key: key, h: h, m: g.build(key)}
	e.used.Store(g.epoch.Load() << 1)
	if t.full() {
		t = g.rebuild(g.ringN + g.pinN + 1)
	}
	t.put(e)
	g.hand = ringAdd(g.hand, e)
	g.ringN++
	return e.m
}

// advance starts a new epoch when the current one has lasted gran.
func (g *Group[T]) advance(now time.Time) {
	ep := g.epoch.Load()
	if now.Sub(g.times[ep%epochs]) >= g.gran {
		g.times[(ep+1)%epochs] = now
		g.epoch.Store(ep + 1)
	}
}

// isIdle reports whether e has not been used for g.idle: its last use was
// before the start of the epoch after the one it records, and that start
// is g.idle ago or more. An epoch lasts at least a quarter of idle, so one
// more than epochs-1 back is idle.
func (g *Group[T]) isIdle(e *entry[T], now time.Time) bool {
	ep, cur := e.used.Load()>>1, g.epoch.Load()
	if ep >= cur {
		return false
	}
	next := ep + 1
	if cur-next >= epochs-1 {
		return true
	}
	return now.Sub(g.times[next%epochs]) >= g.idle
}

// kept asks keep about e.
func (g *Group[T]) kept(e *entry[T], idle bool) bool {
	return g.keep != nil && g.keep(e.m, idle)
}

// evict removes one member to make room: the first one past the hand that
// is not kept and whose reference bit is clear (clearing the bits it
// passes), or idle. A member found kept moves to the kept ring. It reports
// false when every member is kept.
func (g *Group[T]) evict(now time.Time) bool {
	for passed := 0; g.ringN > 0; {
		e := g.hand
		g.hand = e.next
		idle := g.isIdle(e, now)
		if g.kept(e, idle) {
			g.pin(e)
			continue
		}
		v := e.used.Load()
		if idle || v&1 == 0 || passed > g.ringN {
			g.remove(e)
			g.evictions.Add(1)
			return true
		}
		e.used.CompareAndSwap(v, v&^1) // a second chance
		passed++
	}
	return false
}

// sweep looks at up to n members past the hand (all of them when n < 0),
// removing the idle ones and moving the kept ones to the kept ring.
func (g *Group[T]) sweep(now time.Time, n int) {
	if n < 0 {
		n = g.ringN
	}
	for ; n > 0 && g.ringN > 0; n-- {
		e := g.hand
		g.hand = e.next
		idle := g.isIdle(e, now)
		switch {
		case g.kept(e, idle):
			g.pin(e)
		case idle:
			g.remove(e)
			g.idles.Add(1)
		}
	}
}

// recheck asks keep again about up to n kept members (all when n < 0),
// moving those it no longer keeps back to the ring with their last use.
func (g *Group[T]) recheck(now time.Time, n int) {
	if n < 0 {
		n = g.pinN
	}
	for ; n > 0 && g.pinN > 0; n-- {
		e := g.pinned
		g.pinned = e.next
		if g.kept(e, g.isIdle(e, now)) {
			continue
		}
		g.pinned = ringDel(g.pinned, e)
		g.pinN--
		e.pinned = false
		// Its last use stands (Get touches kept members too): marking it
		// as just used made an idle half-open breaker that admits probes
		// look busy, so the same sweep kept it again, and a host no longer
		// called held its slot for good.
		g.hand = ringAdd(g.hand, e)
		g.ringN++
	}
}

// pin moves e from the ring to the kept ring.
func (g *Group[T]) pin(e *entry[T]) {
	g.hand = ringDel(g.hand, e)
	g.ringN--
	e.pinned = true
	g.pinned = ringAdd(g.pinned, e)
	g.pinN++
}

// remove takes e, on the ring, out of the group.
func (g *Group[T]) remove(e *entry[T]) {
	g.hand = ringDel(g.hand, e)
	g.ringN--
	e.dead.Store(true)
	g.tab.Load().remove(e, g.tomb)
	if g.release != nil {
		g.gone = append(g.gone, e)
	}
}

// unlock unlocks the group's mutex, then releases the members removed
// while it was held: every one of them even if release panics, the first
// panic going on after — unless done is false, when a panic of build or
// keep is already going on to the caller, and that one must not be
// replaced by release's.
func (g *Group[T]) unlock(done bool) {
	gone := g.gone
	g.gone = nil
	g.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	var first any
	for _, e := range gone {
		func() {
			defer func() {
				if v := recover(); v != nil && first == nil {
					first = v
				}
			}()
			g.release(e.key, e.m)
		}()
	}
	if first != nil && done {
		panic(first)
	}
}

// Close removes every member, releases them (see NewWithRelease), the
// default and overflow members last, and makes the group build no more
// members: Get and For then return the default member, without the
// group's lock. A member built by a Get that raced Close was built before
// Close took the lock, so Close releases it too. Stats still counts what
// the group did. Close is safe to call more than once; later calls do
// nothing.
func (g *Group[T]) Close() {
	g.mu.Lock()
	defer g.unlock(true) // Close calls no build or keep
	if g.closed.Load() {
		return
	}
	g.closed.Store(true)
	for g.pinN > 0 {
		e := g.pinned
		g.pinned = ringDel(g.pinned, e)
		g.pinN--
		e.pinned = false
		g.hand = ringAdd(g.hand, e)
		g.ringN++
	}
	for g.ringN > 0 {
		g.remove(g.hand)
	}
	g.tab.Store(newTable[T](minSlots))
	if g.release != nil {
		g.gone = append(g.gone, &entry[T]{m: g.def}, &entry[T]{m: g.over})
	}
}

// rebuild replaces the table with one holding only the live entries,
// sized for n, and returns it.
func (g *Group[T]) rebuild(n int) *table[T] {
	t := newTable[T](2 * n)
	each := func(head *entry[T], count int) {
		for e := head; count > 0; e, count = e.next, count-1 {
			t.put(e)
		}
	}
	each(g.hand, g.ringN)
	each(g.pinned, g.pinN)
	g.tab.Store(t)
	return t
}

// ringAdd inserts e just before head (the last the hand reaches) and
// returns the ring's head.
func ringAdd[T any](head, e *entry[T]) *entry[T] {
	if head == nil {
		e.prev, e.next = e, e
		return e
	}
	e.prev, e.next = head.prev, head
	head.prev.next = e
	head.prev = e
	return head
}

// ringDel takes e out of the ring at head and returns the ring's head.
func ringDel[T any](head, e *entry[T]) *entry[T] {
	if e.next == e {
		e.prev, e.next = nil, nil
		return nil
	}
	e.prev.next, e.next.prev = e.next, e.prev
	if head == e {
		head = e.next
	}
	e.prev, e.next = nil, nil
	return head
}

// Sweep removes every idle member now, and moves back among the others
// the kept members that no longer need keeping. It takes time in the
// number of members; the group otherwise does this a few members at a
// time, when new keys arrive.
func (g *Group[T]) Sweep() {
	g.mu.Lock()
	done := false
	defer func() { g.unlock(done) }()
	now := g.clk.Now()
	g.advance(now)
	g.recheck(now, -1)
	g.sweep(now, -1)
	if t := g.tab.Load(); t.used > 2*(g.ringN+g.pinN)+minSlots {
		g.rebuild(g.ringN + g.pinN)
	}
	done = true
}

// Len returns the number of live members, the default and overflow
// members aside.
func (g *Group[T]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ringN + g.pinN
}

// Stats returns the group's counts.
func (g *Group[T]) Stats() Stats {
	g.mu.Lock()
	live, kept := g.ringN+g.pinN, g.pinN
	g.mu.Unlock()
	return Stats{Live: live, Kept: kept, Evictions: g.evictions.Load(), Idle: g.idles.Load(), Overflows: g.overflows.Load()}
}

// Each calls f with every live member's key and member, under the
// group's lock (f must not use the group), in no particular order.
func (g *Group[T]) Each(f func(key string, member T)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, head := range [...]struct {
		e *entry[T]
		n int
	}{{g.hand, g.ringN}, {g.pinned, g.pinN}} {
		for e, n := head.e, head.n; n > 0; e, n = e.next, n-1 {
			f(e.key, e.m)
		}
	}
}
