package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestDegradedFailuresDoNotReopenRecoveredFleet (issue 32 item 10): three
// processes share a breaker that process 0 opened. Process 2 loses Redis
// while it is open (CLIENT PAUSE, a Redis restart, a partition of process 2
// alone); after the open period it is half-open, and its local probe
// fails: it opens again. Meanwhile process 0's probe closes the shared breaker. When
// process 2 re-joins, its failures were made against the open state it
// last saw, not against the closed state the fleet recovered to: they must
// not re-open it. Every process then admits every call to the healthy
// downstream.
func TestDegradedFailuresDoNotReopenRecoveredFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	for _, fault := range []string{"pause", "restart", "partition"} {
		t.Run(fault, func(t *testing.T) { testDegradedFailuresDoNotReopen(t, fault) })
	}
}

func testDegradedFailuresDoNotReopen(t *testing.T, fault string) {
	srv := ownRedis(t)
	ns := namespace(t)
	ps := make([]*proxy, 3)
	hs := make([]*helper, 3)
	for i := range hs {
		ps[i] = newProxy(t, srv.addr) // each process reaches Redis through its own proxy
		hs[i] = startHelper(t, "single", ps[i].addr, ns, 0)
	}
	name := func(i int) string { return "process " + strconv.Itoa(i) }
	if got := hs[0].do(t, "fail 5"); got != "ok" {
		t.Fatal(got)
	}
	if got := hs[0].do(t, "sync"); got != "open" {
		t.Fatalf("process 0 after 5 failures: %s, want open", got)
	}
	for i, h := range hs {
		waitFor(t, name(i)+" to see the breaker open", func() bool { return h.do(t, "state") == "open" })
	}

	// Process 2 loses Redis while the breaker is open.
	ctx := context.Background()
	admin := newClient(t, srv.addr)
	lost := []int{2}
	switch fault {
	case "pause":
		// WRITE: scripts wait, and CLIENT UNPAUSE still runs.
		if err := admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = newClient(t, srv.addr).Do(ctx, "CLIENT", "UNPAUSE").Err() })
		lost = []int{0, 1, 2}
	case "restart":
		srv.kill()
		lost = []int{0, 1, 2}
	case "partition":
		ps[2].cut()
	}
	for _, i := range lost {
		waitFor(t, name(i)+" to fall back", func() bool { return hs[i].do(t, "degraded") == "true" })
	}
	// After the open period process 2 is half-open, as breaker.Breaker
	// would be: its local probe meets the still failing downstream and
	// opens it again.
	waitFor(t, "process 2's open period to end", func() bool { return hs[2].do(t, "state") == "half-open" })
	if got := hs[2].do(t, "fail 5"); got != "ok" {
		t.Fatal(got)
	}
	if got := hs[2].do(t, "state"); got != "open" {
		t.Fatalf("process 2 after a failed local probe: %s, want open", got)
	}

	// Redis comes back for processes 0 and 1 only.
	ps[2].cut()
	switch fault {
	case "pause":
		if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Fatal(err)
		}
	case "restart":
		if err := srv.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 1} {
		waitFor(t, name(i)+" to re-join", func() bool { return hs[i].do(t, "degraded") == "false" })
	}
	// The downstream is healthy again: process 0's probe closes the breaker.
	waitFor(t, "process 0 to see the breaker half-open", func() bool { return hs[0].do(t, "sync") == "half-open" })
	if got := hs[0].do(t, "probe"); got != "admitted" {
		t.Fatalf("process 0's probe: %s", got)
	}
	if got := hs[0].do(t, "finish"); got != "closed" {
		t.Fatalf("after a successful probe process 0 sees %s", got)
	}
	if got := hs[1].do(t, "sync"); got != "closed" {
		t.Fatalf("process 1 after the probe: %s, want closed", got)
	}

	// Process 2 re-joins, carrying the failures of its degraded period.
	ps[2].heal()
	waitFor(t, "process 2 to re-join", func() bool { return hs[2].do(t, "degraded") == "false" })
	for i, h := range []*helper{hs[2], hs[0], hs[1]} {
		if got := h.do(t, "sync"); got != "closed" {
			t.Errorf("%s after process 2 re-joined: %s, want closed", name([]int{2, 0, 1}[i]), got)
		}
	}
	for i, h := range hs {
		if got := h.do(t, "ok 100"); got != "0" {
			t.Errorf("%s refused %s of 100 calls to the healthy downstream after the fleet recovered", name(i), got)
		}
	}
	for _, h := range hs {
		_, _ = h.in.Write([]byte("quit\n"))
	}
}

// TestLocalCallEndingAfterRejoinDoesNotReopen (issue 32 item 10): a call
// admitted by the local breaker while the process was degraded ends, with
// a failure, after the process re-joined a fleet that recovered meanwhile.
// Its failure (and the local trip it causes) belongs to the state the
// process last saw before it lost Redis, and must not re-open the fleet.
func TestLocalCallEndingAfterRejoinDoesNotReopen(t *testing.T) {
	srv := ownRedis(t)
	p := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	cfg := BreakerConfig{
		Name: "late", Namespace: namespace(t), Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: time.Second,
	}
	var bs []*Breaker
	for _, addr := range []string{p.addr, srv.addr} {
		c := cfg
		c.Client = newClient(t, addr)
		b, err := NewBreaker(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
	}
	a, b := bs[0], bs[1]
	for _, x := range bs {
		waitFor(t, "the first exchange", func() bool { return x.Stats().Syncs >= 1 })
	}
	fc.BlockUntil(2)
	_ = call(b, errDown)
	mustSync(t, b)
	mustSync(t, a)
	wantState(t, a, breaker.Open)

	p.cut()
	if err := a.Sync(syncCtx(t)); err == nil || !a.Stats().Degraded {
		t.Fatalf("Sync through a cut proxy: %v, stats %+v", err, a.Stats())
	}
	fc.Advance(time.Minute) // the open period ends
	fc.BlockUntil(2)
	late, err := a.Allow() // admitted by A's fresh local breaker
	if err != nil {
		t.Fatalf("A's local breaker after the open period: %v", err)
	}
	mustSync(t, b)
	probe, err := b.Allow()
	if err != nil {
		t.Fatalf("B's probe: %v", err)
	}
	probe(nil)
	wantState(t, b, breaker.Closed)

	p.heal()
	mustSync(t, a)
	wantState(t, a, breaker.Closed)
	late(errDown) // ends after A re-joined the recovered fleet
	for _, x := range []*Breaker{a, b, a} {
		mustSync(t, x)
		wantState(t, x, breaker.Closed)
	}
}
