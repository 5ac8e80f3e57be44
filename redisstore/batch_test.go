package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"pgregory.net/rapid"
)

// sharedField reads one field of the shared state hash of f's breaker.
func sharedField(t *testing.T, addr, ns, name, field string) string {
	t.Helper()
	v, err := newClient(t, addr).HGet(context.Background(), ns+":{"+name+"}:state", field).Result()
	if err != nil {
		return ""
	}
	return v
}

// TestFailuresBeforeFirstExchange (issue #26 item 0): a process that
// starts during an incident fails its first calls before its first
// exchange with Redis. Every one of those outcomes reaches Redis, the
// local trip they cause opens the shared breaker, and the first exchange
// does not close the breaker the process opened.
func TestFailuresBeforeFirstExchange(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	px.hold() // the first exchange waits in the proxy until the calls are made
	fc := clocktest.NewFake()
	ns := namespace(t)
	cfg := BreakerConfig{
		Name: "orders", Namespace: ns, Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: 5 * time.Second,
	}
	c := cfg
	c.Client = newClient(t, px.addr)
	a, err := NewBreaker(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	var dones []func(error)
	for i := range 10 { // 10 calls at once
		done, err := a.Allow()
		if err != nil {
			t.Fatalf("call %d before the first exchange: %v", i, err)
		}
		dones = append(dones, done)
	}
	for _, done := range dones {
		done(errDown)
	}
	wantState(t, a, breaker.Open) // the local breaker opened after 5
	px.release()
	waitFor(t, "the first exchange", func() bool { return a.Stats().Syncs >= 1 })
	wantState(t, a, breaker.Open)
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	if got := sharedField(t, srv.addr, ns, "orders", "trips"); got != "1" {
		t.Fatalf("shared trips = %q, want 1", got)
	}
	c = cfg
	c.Client = newClient(t, srv.addr)
	b, err := NewBreaker(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
}

// TestConsecutiveRunWithinBatch (issue #26 item 1): fail, fail, fail,
// succeed in one batch with a limit of 3 trips the shared breaker, as a
// local breaker.Breaker trips at the third failure.
func TestConsecutiveRunWithinBatch(t *testing.T) {
	bc := breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute, OpenJitter: -1}
	local := breaker.New(bc)
	defer local.Close()
	f := newFleet(t, 1, bc)
	a := f.bs[0]
	for _, err := range []error{errDown, errDown, errDown, nil} {
		_ = call(a, err)
		_ = call(local, err)
	}
	if got := local.State(); got != breaker.Open {
		t.Fatalf("local breaker: %v, want open", got)
	}
	mustSync(t, a)
	wantState(t, a, breaker.Open)
}

// TestConsecutiveRunAcrossBatches (issue #26 item 1): one process fails
// twice and flushes; another fails then succeeds: the fleet saw three
// failures in a row, and a limit of 3 trips.
func TestConsecutiveRunAcrossBatches(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute})
	a, b := f.bs[0], f.bs[1]
	_ = call(a, errDown)
	_ = call(a, errDown)
	mustSync(t, a)
	_ = call(b, errDown)
	_ = call(b, nil)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
	// A trailing run carries into the next batch; a success then ends it.
	f2 := newFleet(t, 1, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute})
	c := f2.bs[0]
	for _, err := range []error{nil, errDown, errDown} {
		_ = call(c, err)
	}
	mustSync(t, c)
	if got := c.Counts().ConsecutiveFailures; got != 2 {
		t.Fatalf("trailing run = %d, want 2", got)
	}
	_ = call(c, nil)
	_ = call(c, errDown)
	mustSync(t, c)
	wantState(t, c, breaker.Closed)
	if got := c.Counts().ConsecutiveFailures; got != 1 {
		t.Fatalf("run after a success = %d, want 1", got)
	}
}

// TestConsecutiveRunsMatchLocal (issue #26 item 1), a property: whatever
// the outcomes and wherever the flushes fall between them, the shared
// breaker of one process is open after a flush exactly when a local
// breaker.Breaker with the same ConsecutiveFailures, fed the same outcomes
// (until it opens), is.
func TestConsecutiveRunsMatchLocal(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newClient(t, srv.addr)
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 5).Draw(rt, "limit")
		steps := rapid.SliceOfN(rapid.IntRange(0, 2), 1, 40).Draw(rt, "steps") // 0 success, 1 failure, 2 flush
		bc := breaker.Config{ConsecutiveFailures: limit, OpenTimeout: time.Hour, OpenJitter: -1}
		fc := clocktest.NewFake()
		a, err := NewBreaker(BreakerConfig{
			Client: rdb, Name: "prop", Namespace: namespace(t), Clock: fc, Breaker: bc,
			RefreshInterval: time.Hour, Timeout: time.Second,
		})
		if err != nil {
			rt.Fatal(err)
		}
		defer a.Close()
		for start := time.Now(); a.Stats().Syncs == 0; { // the loop's first exchange
			if time.Since(start) > 10*time.Second {
				rt.Fatal("no first exchange within 10s")
			}
			time.Sleep(time.Millisecond)
		}
		fc.BlockUntil(1)
		local := breaker.New(bc)
		defer local.Close()
		for i, step := range steps {
			if step == 2 {
				if err := a.Sync(context.Background()); err != nil {
					rt.Fatal(err)
				}
				if got, want := a.State(), local.State(); got != want {
					rt.Fatalf("after step %d: shared %v, local %v", i, got, want)
				}
				continue
			}
			var err error
			if step == 1 {
				err = errDown
			}
			if local.State() == breaker.Closed {
				_ = call(local, err)
			}
			// The shared breaker admits calls on its cached state until the
			// next flush, after the local one has tripped too.
			_ = call(a, err)
		}
		if err := a.Sync(context.Background()); err != nil {
			rt.Fatal(err)
		}
		if got, want := a.State(), local.State(); got != want {
			rt.Fatalf("at the end: shared %v, local %v", got, want)
		}
	})
}
