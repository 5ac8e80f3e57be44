package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// readCounter is a fake clock that counts the reads of the time made on
// one goroutine (the test's): the background exchanges read it too, on
// their own goroutine, and are not counted.
type readCounter struct {
	*clocktest.Fake
	g     atomic.Uint64 // the goroutine counted
	reads atomic.Int64
}

func newReadCounter() *readCounter {
	rc := &readCounter{Fake: clocktest.NewFake()}
	rc.g.Store(goid())
	return rc
}

func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return n
}

func (c *readCounter) count() {
	if goid() == c.g.Load() {
		c.reads.Add(1)
	}
}

func (c *readCounter) Now() time.Time                  { c.count(); return c.Fake.Now() }
func (c *readCounter) Since(t time.Time) time.Duration { c.count(); return c.Fake.Since(t) }

// gatedConfig is the configuration of the Breakers of the gate tests: no
// refresh within a test (the clock never moves an hour), and a fake clock.
func gatedConfig(t *testing.T, name string, clk *readCounter, bc breaker.Config) BreakerConfig {
	t.Helper()
	return BreakerConfig{
		Client: newClient(t, sharedRedis(t).addr), Name: name, Namespace: namespace(t),
		Breaker: bc, RefreshInterval: time.Hour, Timeout: 5 * time.Second, Clock: clk,
	}
}

// newGatedBreaker makes a Breaker of c whose open periods end by a timer,
// as on the real clock, whatever c's Clock, or, with gate false, one whose
// every refusal reads the clock, and waits for its first exchange.
func newGatedBreaker(t *testing.T, c BreakerConfig, gate bool) *Breaker {
	t.Helper()
	s, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	s.gate = gate
	b := startBreaker(s, c.Breaker.Rand)
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	return b
}

// wantRefusing checks that b refuses calls as open, through each of its
// methods, without reading the clock.
func wantRefusing(t *testing.T, b *Breaker, rc *readCounter) {
	t.Helper()
	rc.reads.Store(0)
	for range 3 {
		if _, err := b.Allow(); err != breaker.ErrOpen {
			t.Fatalf("Allow = %v, want ErrOpen", err)
		}
	}
	if err := b.Ready(); err != breaker.ErrOpen {
		t.Fatalf("Ready = %v, want ErrOpen", err)
	}
	if st, refusing := b.Peek(); st != breaker.Open || !refusing {
		t.Fatalf("Peek = %v, %v", st, refusing)
	}
	if st := b.State(); st != breaker.Open {
		t.Fatalf("State = %v, want open", st)
	}
	if n := rc.reads.Load(); n != 0 {
		t.Fatalf("refusals read the clock %d times, want 0", n)
	}
}

// TestSharedOpenRefusalReadsNoClock (issue #36): on the real clock a
// refusal by the open shared Breaker reads no clock, whether the process
// tripped it or another one did, and after a refresh moved the open
// period's end; the end is marked by a timer, which on a fake clock fires
// at the exact end, so that the period ends exactly when it did when every
// refusal read the clock.
func TestSharedOpenRefusalReadsNoClock(t *testing.T) {
	rc := newReadCounter()
	bc := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second, OpenJitter: -1}
	c := gatedConfig(t, "gate", rc, bc)
	a := newGatedBreaker(t, c, true)
	c.Client = newClient(t, sharedRedis(t).addr)
	other := newGatedBreaker(t, c, true)
	if s, _ := (BreakerConfig{Client: c.Client, Name: "x"}).resolve(); !s.gate {
		t.Fatal("a Breaker on the real clock is not gated")
	}
	if s, _ := c.resolve(); s.gate {
		t.Fatal("a Breaker on a fake clock is gated")
	}

	// a trips the shared state; other learns it from the fleet.
	if err := call(a, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, a)
	mustSync(t, other)
	wantRefusing(t, a, rc)
	wantRefusing(t, other, rc)

	rc.Advance(10*time.Second - time.Millisecond)
	wantRefusing(t, a, rc)
	wantRefusing(t, other, rc)
	rc.Advance(time.Millisecond)
	for _, b := range []*Breaker{a, other} {
		if st := b.State(); st != breaker.HalfOpen {
			t.Fatalf("at the end of the open period: State = %v, want half-open", st)
		}
		if err := b.Ready(); err != nil {
			t.Fatalf("at the end of the open period: Ready = %v", err)
		}
	}

	// A failed probe opens it again, for 10s more; then a refresh moves
	// the end 5s later, and another 7s earlier.
	if err := call(a, errDown); err != nil {
		t.Fatalf("probe: %v", err)
	}
	mustSync(t, other)
	wantRefusing(t, a, rc)
	wantRefusing(t, other, rc)
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t).addr})
	defer rdb.Close()
	move := func(ms int64) {
		t.Helper()
		if err := rdb.HIncrBy(context.Background(), a.stateKey, "until", ms).Err(); err != nil {
			t.Fatal(err)
		}
		mustSync(t, a)
		mustSync(t, other)
	}
	move(5000)
	rc.Advance(15*time.Second - time.Millisecond)
	wantRefusing(t, a, rc)
	wantRefusing(t, other, rc)
	move(-7000) // the period ended 7s ago - 1ms
	for _, b := range []*Breaker{a, other} {
		if st := b.State(); st != breaker.HalfOpen {
			t.Fatalf("after the refresh moved the end back: State = %v, want half-open", st)
		}
	}
	if n := rc.Pending(); n != 2 {
		t.Fatalf("%d timers pending, want the 2 refresh timers", n)
	}
}

// TestGatedSharedOpenPeriodsMatchClockReads: with jitter and growing
// periods, tripped by the process and by the fleet, a gated shared
// Breaker's open periods end at the same instants as those of one that
// reads the clock on every refusal, for the same random source, and its
// listeners hear the same transitions at the same instants.
func TestGatedSharedOpenPeriodsMatchClockReads(t *testing.T) {
	bc := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxOpenTimeout: 30 * time.Second, OpenJitter: 0.5}
	type side struct {
		rc      *readCounter
		b, peer *Breaker // peer trips it from the fleet, every other time
		heard   []string
		step    int
	}
	mk := func(gate bool) *side {
		s := &side{rc: newReadCounter()}
		c := gatedConfig(t, "match", s.rc, bc)
		c.Breaker.Rand = rand.NewPCG(7, 9)
		c.Breaker.OnStateChange = func(from, to breaker.State) {
			s.heard = append(s.heard, fmt.Sprintf("%d:%v->%v", s.step, from, to))
		}
		s.b = newGatedBreaker(t, c, gate)
		c.Client = newClient(t, sharedRedis(t).addr)
		c.Breaker.Rand = rand.NewPCG(11, 13)
		c.Breaker.OnStateChange = nil
		s.peer = newGatedBreaker(t, c, gate)
		return s
	}
	gated, plain := mk(true), mk(false)
	const step = 37 * time.Millisecond
	for trip := range 6 {
		var ends [2]int
		for i, s := range []*side{gated, plain} {
			tripper := s.b
			if trip%2 == 1 {
				tripper = s.peer
			}
			mustSync(t, tripper)
			if err := call(tripper, errDown); err != nil { // a failure, or a failed probe
				t.Fatalf("trip %d: %v", trip, err)
			}
			mustSync(t, tripper)
			mustSync(t, s.b)
			if st := s.b.State(); st != breaker.Open {
				t.Fatalf("trip %d: state %v, want open", trip, st)
			}
			for s.b.State() == breaker.Open {
				if ends[i]++; ends[i] > 10000 {
					t.Fatal("the open period does not end")
				}
				s.step++
				s.rc.Advance(step)
			}
		}
		if ends[0] != ends[1] {
			t.Fatalf("trip %d: the gated period ended after %d steps, the other after %d", trip, ends[0], ends[1])
		}
	}
	if g, p := fmt.Sprint(gated.heard), fmt.Sprint(plain.heard); g != p {
		t.Fatalf("the gated Breaker's listener heard %s, the other's %s", g, p)
	}
}

// panicAfterFunc is a readCounter whose AfterFunc panics.
type panicAfterFunc struct{ *readCounter }

func (*panicAfterFunc) AfterFunc(time.Duration, func()) clock.Timer { panic("AfterFunc failed") }

// TestGatedPanickingAfterFuncEndsOpenPeriod: a Clock whose AfterFunc
// panics when the end of an open period is to be marked: the panic goes
// on to the caller of Sync, the Breaker judges the period by reading the
// clock, so that it still ends on time, and the next exchange is made.
func TestGatedPanickingAfterFuncEndsOpenPeriod(t *testing.T) {
	rc := newReadCounter()
	pc := &panicAfterFunc{rc}
	c := gatedConfig(t, "gate-panic", rc, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second, OpenJitter: -1})
	c.Clock = pc
	b := newGatedBreaker(t, c, true)
	if err := call(b, errDown); err != nil {
		t.Fatal(err)
	}
	var heard []string // the listener runs on this goroutine (Sync's)
	b.Subscribe(func(from, to breaker.State) { heard = append(heard, from.String()+"->"+to.String()) })
	func() {
		defer func() {
			if v := recover(); v != "AfterFunc failed" {
				t.Fatalf("Sync: panic %v, want the clock's", v)
			}
		}()
		_ = b.Sync(syncCtx(t))
	}()
	if got := fmt.Sprint(heard); got != "[closed->open]" {
		t.Fatalf("the listener heard %v before the clock's panic went on", got)
	}
	wantState(t, b, breaker.Open)
	rc.Advance(10*time.Second - time.Millisecond)
	wantState(t, b, breaker.Open)
	rc.Advance(time.Millisecond)
	wantState(t, b, breaker.HalfOpen)
	mustSync(t, b) // the right to call Redis was released
}
