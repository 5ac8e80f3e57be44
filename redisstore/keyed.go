package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// MaxVerbatimKey is the longest key a keyed group puts in its Redis keys
// as it is. A longer key, or one with a byte outside printable ASCII (space
// included) or a brace, is put there as a hash of itself (see keyTag).
const MaxVerbatimKey = 64

// keyTag returns the Redis Cluster hash tag of name's member for key: name
// itself for the empty key (the default member shares the state of the
// unkeyed part of that name), name + ":=" + key for a short plain key,
// name + ":#" and 32 hex digits of its SHA-256 for any other, and
// name + ":#overflow" for the overflow member. The markers keep the three
// forms apart, and, as a name holds neither (resolveLink refuses them),
// the first marker in a tag ends the name: different names and keys get
// different tags; and the tag is at most len(name) + 2 + MaxVerbatimKey
// bytes whatever the key.
func keyTag(name, key string, overflow bool) string {
	switch {
	case overflow:
		return name + ":#overflow"
	case key == "":
		return name
	case plainKey(key):
		return name + ":=" + key
	}
	sum := sha256.Sum256([]byte(key))
	return name + ":#" + hex.EncodeToString(sum[:16])
}

// plainKey reports whether key goes in a Redis key as it is.
func plainKey(key string) bool {
	if len(key) > MaxVerbatimKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// memberName names a member in log messages and errors.
func memberName(name, key string, overflow bool) string {
	switch {
	case overflow:
		return name + " (overflow)"
	case key == "":
		return name
	case len(key) > MaxVerbatimKey:
		return name + " key " + key[:MaxVerbatimKey] + "..."
	}
	return name + " key " + key
}

// withTag returns l for the member of key: its keys under keyTag's tag.
func (l linkConfig) withTag(key string, overflow bool) linkConfig {
	l.prefix = l.ns + ":{" + keyTag(l.name, key, overflow) + "}:"
	l.member = Member{Key: key, Overflow: overflow}
	l.name = memberName(l.name, key, overflow)
	return l
}

// closer closes the members a group lets go on goroutines of its own, so
// that a Get that removes a member does not wait on Redis, and waits for
// them at the end. At most maxClosing run at once; past that a member is
// closed on the goroutine that let it go (a new key's first Get waits,
// rather than goroutines growing with the rate of new keys). A panic of a
// close on a goroutine of its own (a state listener that panicked while
// the close flushed) has no caller to go on to: it is logged at Error
// level (the config's Logger; nil: silent), as on the background loop.
type closer struct {
	logger  *slog.Logger
	what    string
	mu      sync.Mutex
	running int
	done    bool
	idle    sync.Cond
}

const maxClosing = 64

func (c *closer) close(m interface{ Close() }) {
	c.mu.Lock()
	if c.done || c.running >= maxClosing {
		c.mu.Unlock()
		m.Close()
		return
	}
	c.running++
	c.mu.Unlock()
	go func() {
		defer func() {
			if v := recover(); v != nil && c.logger != nil {
				c.logger.Error("redisstore: a callback panicked while a removed member closed; recovered",
					"kind", c.what, "panic", v, "stack", string(debug.Stack()))
			}
			c.mu.Lock()
			c.running--
			if c.running == 0 && c.idle.L != nil {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
		}()
		m.Close()
	}()
}

// wait waits for the closes under way; later ones run on their caller.
func (c *closer) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	if c.idle.L == nil {
		c.idle.L = &c.mu
	}
	for c.running > 0 {
		c.idle.Wait()
	}
}

// KeyedBreakers is a group of shared Breakers, one per key (a host, a
// method: keyed.KeyFrom of each call's context), bounded as keyed.Group
// is: at most keyed.Config.MaxKeys live members, idle ones removed. Each
// member is a Breaker of its own in Redis, so one dead host opens its
// breaker for the whole fleet and the others stay closed. The key is in
// the member's Redis keys, inside the hash tag, so that each key's state
// is one hash slot on Redis Cluster:
//
//	<Namespace>:{<Name>:=<key>}:state            a short plain key
//	<Namespace>:{<Name>:#<32 hex digits>}:state  any other (SHA-256 of the key)
//
// The default member (the empty key) is the unkeyed Breaker of Name: it
// shares its state with a plain Breaker of the same Name. The overflow
// member is {<Name>:#overflow}.
//
// It is a retry.BreakerGroup: as a Policy's Breaker, each call uses the
// member of its key, and a call does not wait on Redis any more than with
// one Breaker (Get of a live key takes no lock). A member that refuses
// calls (open, or half-open and refusing) is never removed, as for
// keyed.Breakers. A member removed, and every member at Close, is closed
// (Breaker.Close: its goroutine ends, what it counted is flushed) on a
// goroutine of its own, so that the Get that removed it does not wait on
// Redis; past 64 closes under way it is closed on that Get's goroutine. A
// panic of such a close (a state listener hearing the change its last
// flush made) is recovered and logged at Error level (Logger; nil:
// silent) on a goroutine of its own, and goes on to the caller otherwise.
// BreakerConfig.OnStateChange and OnDegraded hear every member, without
// its key; OnMemberStateChange and OnMemberDegraded hear every member
// with its key (see Member).
//
// A new member decides its first calls on local state until its first
// exchange (made at once, in the background), as a Breaker fresh from
// NewBreaker does: a key removed while idle and used again may admit a
// few calls before it learns that the fleet opened its breaker meanwhile.
//
// Each live member runs one goroutine and one Redis round trip per
// RefreshInterval: MaxKeys bounds both. With BreakerConfig.BatchRefresh
// the group runs one goroutine instead, which refreshes every member in
// pipelined exchanges (see SyncAll). Close the group when done.
type KeyedBreakers struct {
	*keyed.Group[*Breaker]
	c      closer
	closed atomic.Bool // Close was called
	loop   *link       // BatchRefresh: the group's loop, which refreshes every member; else nil
}

var _ retry.BreakerGroup = (*KeyedBreakers)(nil)

// NewKeyedBreakers returns a group of shared Breakers configured by c (its
// Name the group's), bounded by kc. kc.Clock nil: c's clock (c.Clock, else
// c.Breaker.Clock). It makes no Redis call: each member starts its
// exchange with Redis when it is made (the default and overflow members
// at once). It refuses a kc that keyed.Config.Validate refuses and a c that
// Validate refuses.
func NewKeyedBreakers(kc keyed.Config, c BreakerConfig) (*KeyedBreakers, error) {
	s, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if kc.Clock == nil {
		kc.Clock = s.link.clk
	}
	k := &KeyedBreakers{c: closer{logger: s.link.logger, what: "breaker " + s.link.name}}
	if _, ok := s.link.client.(pipeliner); ok && c.BatchRefresh {
		lc := s.link
		lc.onMember, lc.onDegraded = nil, nil // the group's loop announces no transition: its members do
		k.loop = newLink(lc, "breaker group")
	}
	builtDefault := false
	g, err := keyed.NewWithRelease(kc, func(key string) *Breaker {
		ms := s
		overflow := key == "" && builtDefault // keyed.New builds the default member first, then the overflow member
		builtDefault = builtDefault || key == ""
		ms.link = s.link.withTag(key, overflow)
		return startMember(ms, c.Breaker.Rand, k.loop)
	}, keepRefusing, func(_ string, b *Breaker) { k.c.close(b) })
	if err != nil {
		return nil, err
	}
	k.Group = g
	if k.loop != nil {
		go k.loop.run(k.loopSync)
	}
	return k, nil
}

// loopSync is one refresh of the group's loop (BatchRefresh): SyncAll,
// with the members' listeners (not the Redis pipelines) run as callbacks
// of the loop, so that one of them may Close the group, while a Close
// from elsewhere waits for the loop to end.
func (k *KeyedBreakers) loopSync() {
	_ = k.syncAll(context.Background(), k.loop)
}

// keepRefusing keeps a shared breaker that refuses calls: keyed.Breakers's
// rule (keyed.KeepBreaker), read with Peek under the group's lock.
func keepRefusing(b *Breaker, idle bool) bool { return keyed.KeepBreaker(b, idle) }

// Allow is the default member's Allow.
func (k *KeyedBreakers) Allow() (done func(err error), err error) { return k.Default().Allow() }

// Ready is the default member's Ready.
func (k *KeyedBreakers) Ready() error { return k.Default().Ready() }

// BreakerFor returns the Breaker of keyed.KeyFrom(ctx).
func (k *KeyedBreakers) BreakerFor(ctx context.Context) retry.Breaker {
	return k.For(ctx)
}

// Close closes every member (see Breaker.Close) and waits until they are
// closed. The group then hands every call its closed default member (see
// keyed.Group.Close). With BatchRefresh the group's goroutine ends first:
// Close waits for a refresh under way (its Redis pipelines included),
// except while that goroutine runs the members' listeners, when Close
// does not wait for them (it may be called from one of them), as for
// Breaker.Close. Close is safe to call more than once.
func (k *KeyedBreakers) Close() {
	k.closed.Store(true)
	if k.loop != nil {
		k.loop.shut() // the group's loop ends first: it refreshes no closed member
	}
	defer k.c.wait() // even if a listener panics
	k.Group.Close()
}

// KeyedBudgets is a group of shared Budgets, one per key, as KeyedBreakers
// is of Breakers: each key draws on a bucket of its own in Redis (keys
// "<Namespace>:{<Name>:=<key>}:budget" and so on), the default member's is
// the unkeyed Budget of Name, and a member removed gives its lease back
// (Budget.Close) on a goroutine of its own. BudgetConfig.OnDegraded
// hears every member without its key, OnMemberDegraded with it (see
// Member). With BudgetConfig.BatchRefresh one goroutine refreshes every
// member in pipelined exchanges (see SyncAll), as for KeyedBreakers. It
// is a retry.BudgetGroup.
// Budgets are never kept: an idle one is removed, and its key's next call
// joins the bucket the fleet keeps in Redis again. Close the group when
// done.
type KeyedBudgets struct {
	*keyed.Group[*Budget]
	c      closer
	closed atomic.Bool // Close was called
	loop   *link       // BatchRefresh: the group's loop, which refreshes every member; else nil
}

var _ retry.BudgetGroup = (*KeyedBudgets)(nil)

// NewKeyedBudgets returns a group of shared Budgets configured by c,
// bounded by kc (kc.Clock nil: c.Clock). It refuses what
// keyed.Config.Validate and c.Validate refuse.
func NewKeyedBudgets(kc keyed.Config, c BudgetConfig) (*KeyedBudgets, error) {
	s, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if kc.Clock == nil {
		kc.Clock = s.link.clk
	}
	k := &KeyedBudgets{c: closer{logger: s.link.logger, what: "budget " + s.link.name}}
	if _, ok := s.link.client.(pipeliner); ok && c.BatchRefresh {
		lc := s.link
		lc.onMember, lc.onDegraded = nil, nil // the group's loop announces no transition: its members do
		k.loop = newLink(lc, "budget group")
	}
	builtDefault := false
	g, err := keyed.NewWithRelease(kc, func(key string) *Budget {
		ms := s
		overflow := key == "" && builtDefault
		builtDefault = builtDefault || key == ""
		ms.link = s.link.withTag(key, overflow)
		return startBudget(ms, k.loop)
	}, nil, func(_ string, b *Budget) { k.c.close(b) })
	if err != nil {
		return nil, err
	}
	k.Group = g
	if k.loop != nil {
		go k.loop.run(k.loopSync)
	}
	return k, nil
}

// loopSync is one refresh of the group's loop (BatchRefresh): SyncAll,
// with OnDegraded (not the Redis pipelines) run as a callback of the
// loop, so that it may Close the group, while a Close from elsewhere
// waits for the loop to end.
func (k *KeyedBudgets) loopSync() {
	_ = k.syncAll(context.Background(), k.loop)
}

// Record is the default member's Record.
func (k *KeyedBudgets) Record(retry bool, err error) { k.Default().Record(retry, err) }

// Withdraw is the default member's Withdraw.
func (k *KeyedBudgets) Withdraw(err error) bool { return k.Default().Withdraw(err) }

// BudgetFor returns the Budget of keyed.KeyFrom(ctx).
func (k *KeyedBudgets) BudgetFor(ctx context.Context) retry.Budget {
	return k.For(ctx)
}

// Close closes every member (giving their leases back, see Budget.Close)
// and waits until they are closed. With BatchRefresh the group's goroutine
// ends first, as for KeyedBreakers.Close. Close is safe to call more than
// once.
func (k *KeyedBudgets) Close() {
	k.closed.Store(true)
	if k.loop != nil {
		k.loop.shut() // the group's loop ends first: it refreshes no closed member
	}
	defer k.c.wait()
	k.Group.Close()
}
