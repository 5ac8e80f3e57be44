package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestProbeReportRejoins (issue #26 item 5): a probe's report that reaches
// Redis after an exchange failed re-joins the shared state, and Stats and
// OnDegraded say so.
func TestProbeReportRejoins(t *testing.T) {
	srv := ownRedis(t)
	var onDeg degradedLog
	fc := clocktest.NewFake()
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, srv.addr), Name: "rejoin", Namespace: namespace(t), Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: 100 * time.Millisecond, OnDegraded: onDeg.on,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	fc.BlockUntil(1)
	armed := fc.Armed()
	_ = call(b, errDown)          // pokes the loop, which re-arms its timer
	fc.BlockUntilArmed(armed + 1) // so that the re-arm cannot follow the Advance below
	mustSync(t, b)
	fc.Advance(time.Minute) // fires the loop's timer: one exchange
	fc.BlockUntil(1)        // the loop's exchange is over and its timer armed again
	mustSync(t, b)
	done, err := b.Allow() // the probe permit
	if err != nil {
		t.Fatal(err)
	}
	srv.pause()
	serr := b.Sync(syncCtx(t))
	srv.resume()
	if serr == nil || !b.Stats().Degraded {
		t.Fatalf("Sync on a stopped Redis: %v, stats %+v", serr, b.Stats())
	}
	done(nil) // reaches Redis: closes the breaker
	wantState(t, b, breaker.Closed)
	if st := b.Stats(); st.Degraded {
		t.Fatalf("stats after the probe's report re-joined: %+v, want not degraded", st)
	}
	if got := onDeg.get(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("OnDegraded calls = %v, want [true false]", got)
	}
}

// TestCloseFromCallbacks (issue #26 item 5): Close called from OnDegraded
// or from a state listener, on the background goroutine, returns.
func TestCloseFromCallbacks(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "127.0.0.1:" + strconv.Itoa(port)
	t.Run("breaker OnDegraded", func(t *testing.T) {
		closed := make(chan struct{})
		var b *Breaker
		var mu sync.Mutex
		mu.Lock()
		b, err := NewBreaker(BreakerConfig{
			Client: newClient(t, nowhere), Name: "x", Namespace: namespace(t),
			OnDegraded: func(bool, error) {
				mu.Lock()
				defer mu.Unlock()
				b.Close()
				close(closed)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		waitClosed(t, closed, b.Close)
	})
	t.Run("budget OnDegraded", func(t *testing.T) {
		closed := make(chan struct{})
		var b *Budget
		var mu sync.Mutex
		mu.Lock()
		b, err := NewBudget(BudgetConfig{
			Client: newClient(t, nowhere), Name: "x", Namespace: namespace(t),
			OnDegraded: func(bool, error) {
				mu.Lock()
				defer mu.Unlock()
				b.Close()
				close(closed)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		waitClosed(t, closed, b.Close)
	})
	t.Run("listener", func(t *testing.T) {
		f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute})
		a, b := f.bs[0], f.bs[1]
		closed := make(chan struct{})
		b.Subscribe(func(_, to breaker.State) {
			if to == breaker.Open {
				b.Close()
				close(closed)
			}
		})
		_ = call(a, errDown)
		mustSync(t, a)
		f.fc.Advance(testInterval) // B's loop refreshes, sees the breaker open, and its listener closes B
		waitClosed(t, closed, b.Close)
	})
}

// waitClosed fails the test unless closed is closed, and Close returns,
// within 10s.
func waitClosed(t *testing.T, closed chan struct{}, closeFn func()) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close called from a callback did not return within 10s: deadlock")
	}
	if within(10*time.Second, closeFn) != nil {
		t.Fatal("a second Close did not return within 10s")
	}
}

// TestTimedDoneTwice (issue #26 item 5): calling the done of a timed call
// twice counts once, and never for another call.
func TestTimedDoneTwice(t *testing.T) {
	f := newFleet(t, 1, breaker.Config{
		Window:      breaker.Window{Duration: time.Minute, MinCalls: 100, SlowCallDuration: time.Second, SlowCallRatio: 0.5},
		OpenTimeout: time.Minute,
	})
	b := f.bs[0]
	for range 50 {
		done1, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done1(nil)
		done2, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done1(errDown) // again: must not count, nor end the second call
		done2(nil)
	}
	mustSync(t, b)
	if c := b.Counts(); c.Successes != 100 || c.Failures != 0 {
		t.Fatalf("counts %+v, want 100 successes and no failure", c)
	}
}

// TestBudgetCloseWhileDegraded (issue #26 item 5): Close gives the lease
// back even when the last exchange failed.
func TestBudgetCloseWhileDegraded(t *testing.T) {
	srv := ownRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	bu, err := NewBudget(BudgetConfig{
		Client: newClient(t, srv.addr), Name: "close", Namespace: ns, Clock: fc,
		RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease", func() bool { return bu.Lease() == 2 })
	fc.BlockUntil(1)
	srv.pause()
	serr := bu.Sync(syncCtx(t))
	srv.resume()
	if serr == nil || !bu.Stats().Link.Degraded {
		t.Fatalf("Sync on a stopped Redis: %v", serr)
	}
	bu.Close()
	if got := bucketTokens(t, srv.addr, ns, "close"); got != 10 {
		t.Fatalf("bucket after Close = %v tokens, want 10: the lease was not given back", got)
	}
}

func bucketTokens(t *testing.T, addr, ns, name string) float64 {
	t.Helper()
	v, err := newClient(t, addr).HGet(context.Background(), ns+":{"+name+"}:budget", "tokens").Int64()
	if err != nil {
		t.Fatal(err)
	}
	return fromUnits(v)
}

// TestStateLossBreaker (issue #26 item 5): Redis loses the shared state
// (FLUSHALL; a restart without persistence) while the breaker is open. The
// processes notice the loss (an epoch per state) and restore the open
// breaker instead of acting on a new closed one.
func TestStateLossBreaker(t *testing.T) {
	srv := ownRedis(t)
	f := newFleetOn(t, srv.addr, 2, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute})
	a, b := f.bs[0], f.bs[1]
	_ = call(a, errDown)
	mustSync(t, a)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
	for _, fault := range []string{"flushall", "restart"} {
		switch fault {
		case "flushall":
			if err := newClient(t, srv.addr).FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		case "restart":
			srv.kill()
			if err := srv.start(); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range []*Breaker{b, a} {
			mustSync(t, x)
			if got := x.State(); got != breaker.Open {
				t.Fatalf("after %s: state %v, want the open breaker restored", fault, got)
			}
		}
		if got := sharedField(t, srv.addr, f.cfg.Namespace, "payments", "st"); got != "2" {
			t.Fatalf("after %s: shared st = %q, want 2 (open)", fault, got)
		}
	}
	// The restored open period ends when the original one would have.
	f.fc.Advance(time.Minute)
	f.fc.BlockUntil(2)
	mustSync(t, a)
	wantState(t, a, breaker.HalfOpen)
}

// TestStateLossBudget (issue #26 item 5): Redis loses the bucket while
// processes hold leases. The new bucket starts full, so the leases of the
// lost one are dropped and taken again from the new bucket: the fleet
// holds no more than MaxTokens.
func TestStateLossBudget(t *testing.T) {
	srv := ownRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	var bs []*Budget
	for range 3 {
		bu, err := NewBudget(BudgetConfig{
			Client: newClient(t, srv.addr), Name: "loss", Namespace: ns, Clock: fc,
			Ratio: budget.TenPercent(), RefreshInterval: testInterval, Timeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bu.Close)
		bs = append(bs, bu)
	}
	for _, bu := range bs {
		waitFor(t, "the leases", func() bool { return bu.Lease() == 2 })
	}
	fc.BlockUntil(3)
	if err := newClient(t, srv.addr).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for _, bu := range bs {
		if err := bu.Sync(syncCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	held := bucketTokens(t, srv.addr, ns, "loss")
	for _, bu := range bs {
		held += bu.Lease()
	}
	if held > 10 {
		t.Fatalf("after FLUSHALL the fleet holds %v tokens (bucket and leases), above MaxTokens 10", held)
	}
}

var errPanicky = errors.New("classification panics")

// TestProbePanicReleasesPermit: the user's IsFailure panics while a
// probe's result is classified. The permit is not leaked: the probe counts
// as failed (D1: a panicking call is a failed attempt), which reopens the
// breaker at once, and the panic goes on.
func TestProbePanicReleasesPermit(t *testing.T) {
	f := newFleet(t, 1, breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: time.Minute,
		IsFailure: func(err error) bool {
			if errors.Is(err, errPanicky) {
				panic("IsFailure panicked")
			}
			return err != nil
		},
	})
	a := f.bs[0]
	_ = call(a, errDown)
	mustSync(t, a)
	f.fc.Advance(time.Minute)
	f.fc.BlockUntil(1)
	mustSync(t, a)
	done, err := a.Allow()
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go on")
			}
		}()
		done(errPanicky)
	}()
	wantState(t, a, breaker.Open)
}
