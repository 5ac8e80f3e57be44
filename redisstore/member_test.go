package redisstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// heard records what member listeners heard, from any goroutine.
type heard struct {
	mu  sync.Mutex
	got []string
}

func (h *heard) add(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, fmt.Sprintf(format, args...))
}

func (h *heard) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.got)
}

func (h *heard) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = nil
}

// TestKeyedBreakerListenersHearTheKey (issue #37): the member listeners
// of KeyedBreakers hear which key's breaker moved, the overflow member
// included, and which key's member fell back to local state and re-joined;
// the keyless listeners still hear every member.
func TestKeyedBreakerListenersHearTheKey(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	var keyless, member heard
	k, err := NewKeyedBreakers(keyed.Config{MaxKeys: 2}, BreakerConfig{
		Client: newClient(t, px.addr), Name: "hosts", Namespace: namespace(t), Clock: fc,
		Breaker: breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1,
			OnStateChange: func(from, to breaker.State) { keyless.add("%v->%v", from, to) }},
		RefreshInterval: time.Hour, Timeout: 2 * time.Second,
		OnMemberStateChange: func(m Member, from, to breaker.State) { member.add("%v:%v->%v", m, from, to) },
		OnMemberDegraded: func(m Member, degraded bool, err error) {
			if m.Key != "" { // not the default and overflow members' first exchanges, should they meet the cut
				member.add("%v:degraded=%v:%v", m, degraded, err != nil)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	a, b := k.Get("a.example"), k.Get("b.example")
	mustSync(t, a)
	mustSync(t, b)
	if err := call(a, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, a)
	mustSync(t, b)
	if got := member.String(); got != "[a.example:closed->open]" {
		t.Fatalf("the member listener heard %s", got)
	}
	if got := keyless.String(); got != "[closed->open]" {
		t.Fatalf("OnStateChange heard %s", got)
	}

	// b trips too; both are kept while open, so a third key overflows.
	if err := call(b, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b)
	member.reset()
	o := k.Get("c.example")
	if o != k.Overflow() {
		t.Fatal("a third key did not get the overflow member")
	}
	mustSync(t, o)
	if err := call(o, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, o)
	if got := member.String(); got != "[(overflow):closed->open]" {
		t.Fatalf("the member listener heard %s", got)
	}

	member.reset()
	px.cut()
	if err := a.Sync(syncCtx(t)); err == nil {
		t.Fatal("Sync through a cut proxy succeeded")
	}
	px.heal()
	mustSync(t, a)
	if got := member.String(); got != "[a.example:degraded=true:true a.example:degraded=false:false]" {
		t.Fatalf("the member listener heard %s", got)
	}
	if got := (Member{}).String() + " " + (Member{Key: "x"}).String(); got != "(default) x" {
		t.Fatalf("Member.String: %s", got)
	}
}

// TestMemberListenerPanicHandledAsOthers: a panicking OnMemberStateChange
// and OnMemberDegraded are handled as the other listeners: the others
// still hear the change, the panic goes on to the caller of Sync, and the
// member goes on working (the right to call Redis was released).
func TestMemberListenerPanicHandledAsOthers(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	var keyless heard
	k, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{
		Client: newClient(t, px.addr), Name: "hosts", Namespace: namespace(t), Clock: fc,
		Breaker: breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1,
			OnStateChange: func(from, to breaker.State) { keyless.add("%v->%v", from, to) }},
		RefreshInterval: time.Hour, Timeout: 2 * time.Second,
		OnDegraded:          func(degraded bool, _ error) { keyless.add("degraded=%v", degraded) },
		OnMemberStateChange: func(m Member, from, to breaker.State) { panic("member listener: " + m.Key) },
		OnMemberDegraded:    func(m Member, degraded bool, _ error) { panic("member degraded: " + m.Key) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	a := k.Get("a.example")
	mustSync(t, a)
	fc.BlockUntil(3) // the default, overflow and a's loops made their first exchange: a failure does not wake them
	if err := call(a, errDown); err != nil {
		t.Fatal(err)
	}
	if v := recoverSync(t, a); v != "member listener: a.example" {
		t.Fatalf("Sync: panic %v, want the member listener's", v)
	}
	wantState(t, a, breaker.Open)
	px.cut()
	if v := recoverSync(t, a); v != "member degraded: a.example" {
		t.Fatalf("Sync: panic %v, want the member listener's", v)
	}
	px.heal()
	if v := recoverSync(t, a); v != "member degraded: a.example" {
		t.Fatalf("Sync: panic %v, want the member listener's", v)
	}
	if got := keyless.String(); got != "[closed->open degraded=true degraded=false]" {
		t.Fatalf("the other listeners heard %s", got)
	}
	mustSync(t, a)
}

// recoverSync runs b.Sync and returns what it panicked with.
func recoverSync(t *testing.T, b *Breaker) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	_ = b.Sync(syncCtx(t))
	return nil
}

// TestKeyedBudgetDegradedHearsTheKey: KeyedBudgets's OnMemberDegraded
// hears which key's member lost Redis.
func TestKeyedBudgetDegradedHearsTheKey(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	var member heard
	k, err := NewKeyedBudgets(keyed.Config{}, BudgetConfig{
		Client: newClient(t, px.addr), Name: "hosts", Namespace: namespace(t), Clock: clocktest.NewFake(),
		Ratio: budget.RatioConfig{MaxTokens: 4}, RefreshInterval: time.Hour, Timeout: 2 * time.Second,
		OnMemberDegraded: func(m Member, degraded bool, _ error) {
			if m.Key != "" { // not the default and overflow members' first exchanges, should they meet the cut
				member.add("%v:%v", m, degraded)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	a := k.Get("a.example")
	if err := a.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	px.cut()
	_ = a.Sync(syncCtx(t))
	px.heal()
	if err := a.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := member.String(); got != "[a.example:true a.example:false]" {
		t.Fatalf("the member listener heard %s", got)
	}
}

// TestStoreMemberDegradedHearsTheKey: a policy file's per-host shared
// breaker tells Store.OnMemberDegraded and OnMemberStateChange its part
// and the member's key.
func TestStoreMemberDegradedHearsTheKey(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	var member heard
	st := &Store{Client: newClient(t, px.addr), Namespace: namespace(t), RefreshInterval: time.Hour, Timeout: 2 * time.Second,
		Clock: clocktest.NewFake(),
		OnMemberDegraded: func(part string, m Member, degraded bool, _ error) {
			if m.Key != "" {
				member.add("%s/%v:%v", part, m, degraded)
			}
		},
		OnMemberStateChange: func(part string, m Member, from, to breaker.State) {
			member.add("%s/%v:%v->%v", part, m, from, to)
		}}
	g, closeGroup, err := st.SharedBreakerGroup("hosts", breaker.Config{ConsecutiveFailures: 1, OpenJitter: -1}, keyed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeGroup()
	a := g.(*KeyedBreakers).Get("a.example")
	mustSync(t, a)
	px.cut()
	_ = a.Sync(syncCtx(t))
	px.heal()
	mustSync(t, a)
	if err := call(a, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, a)
	if got := member.String(); got != "[breaker hosts/a.example:true breaker hosts/a.example:false breaker hosts/a.example:closed->open]" {
		t.Fatalf("the Store's member listeners heard %s", got)
	}
}
