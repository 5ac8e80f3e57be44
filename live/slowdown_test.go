package live_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stormguard/stormguard/live"
)

// Issue #22, live: a real loopback server whose service time rises from
// 5ms to 100ms for everyone for 1s; open-loop clients (20, every 100ms:
// 200 calls/s) hedge once after 25ms through hedge.Transport. Unbudgeted
// hedging doubles the requests per call during the slowdown (at least
// 1.75 asked: on a loaded machine a call started near the slowdown's end
// may reach the server after it, answer fast and need no hedge) while one
// shared 10% budget keeps it near 1 (at most 1.3 asked); without hedging
// every call is one request. Bounded: 3s, at most 1,000 calls per policy.
func TestBrownoutHedging(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := live.RunSlowdownHedging(ctx, live.SlowdownHedgingOptions{
		Clients:   20,
		Interval:  100 * time.Millisecond,
		Duration:  3 * time.Second,
		SlowStart: time.Second,
		SlowEnd:   2 * time.Second,
		MaxCalls:  1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.WriteTo(os.Stdout)
	for _, row := range rep.Rows {
		if row.StartLagMax > 250*time.Millisecond {
			t.Skipf("the machine did not keep up (%s: calls started up to %s late): a live figure would measure the harness", row.Policy.Name, row.StartLagMax)
		}
	}
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{live.SlowdownNoHedge, 1, 1},
		{live.SlowdownHedge, 1.75, 2},
		{live.SlowdownHedgeBudget, 1, 1.3},
	} {
		row, ok := rep.Row(c.name)
		if !ok {
			t.Fatalf("no row %s", c.name)
		}
		if row.SlowCalls < 50 {
			t.Errorf("%s: only %d calls during the slowdown", c.name, row.SlowCalls)
			continue
		}
		if row.SlowLoad < c.min || row.SlowLoad > c.max {
			t.Errorf("%s: %.2f requests per call during the slowdown, want within [%v, %v]", c.name, row.SlowLoad, c.min, c.max)
		}
		if row.Success < 0.99 {
			t.Errorf("%s: success %.3f; the slowdown does not fail calls", c.name, row.Success)
		}
	}
}

// Options out of bounds are refused before any server starts.
func TestBrownoutOptionsValidate(t *testing.T) {
	for _, o := range []live.SlowdownHedgingOptions{
		{Clients: -1},
		{Clients: live.DefaultMaxClients + 1},
		{Interval: -time.Second},
		{Duration: live.MaxDuration + time.Second},
		{Duration: time.Second, SlowStart: 2 * time.Second, SlowEnd: 3 * time.Second},
		{Service: -time.Millisecond},
		{Delay: -time.Millisecond},
		{MaxCalls: -1},
		{Policies: []live.SlowdownHedgingPolicy{}},
	} {
		if _, err := live.RunSlowdownHedging(context.Background(), o); !errors.Is(err, live.ErrScenario) {
			t.Errorf("RunSlowdownHedging(%+v) = %v, want ErrScenario", o, err)
		}
	}
}

// SlowdownHedgingPolicy.Adaptive takes the delay from hedge.NewAdaptive: a call
// still makes at most two requests (one hedge), and every call succeeds.
func TestBrownoutAdaptive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := live.RunSlowdownHedging(ctx, live.SlowdownHedgingOptions{
		Clients:  10,
		Duration: 1500 * time.Millisecond,
		MaxCalls: 500,
		Policies: []live.SlowdownHedgingPolicy{{Name: "adaptive", Hedge: true, Adaptive: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	row := rep.Rows[0]
	t.Logf("%+v", row)
	if row.Calls == 0 || row.Success < 0.99 {
		t.Errorf("%d calls, success %.3f", row.Calls, row.Success)
	}
	if n := row.Requests; n < int64(row.Calls) || n > 2*int64(row.Calls) {
		t.Errorf("%d requests for %d calls: want one to two per call", n, row.Calls)
	}
}

// SlowdownHedgingOptions.IgnoreCancel makes the server serve on for the hedges'
// losers: their work shows as Wasted, which a server that stops at once
// does not spend.
func TestBrownoutIgnoreCancelShowsWastedWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wasted := map[bool]time.Duration{}
	for _, ignore := range []bool{false, true} {
		rep, err := live.RunSlowdownHedging(ctx, live.SlowdownHedgingOptions{
			Clients: 10, Duration: 1500 * time.Millisecond, MaxCalls: 500, IgnoreCancel: ignore, Seed: 5,
			Policies: []live.SlowdownHedgingPolicy{{Name: live.SlowdownHedge, Hedge: true}},
		})
		if err != nil {
			t.Fatal(err)
		}
		row := rep.Rows[0]
		if row.Cancelled == 0 {
			t.Skipf("no hedge lost during the slowdown (%+v): nothing to measure", row)
		}
		wasted[ignore] = row.Wasted
	}
	if wasted[false] != 0 || wasted[true] <= 0 {
		t.Errorf("wasted %s honouring cancellation (want 0), %s ignoring it (want more)", wasted[false], wasted[true])
	}
}

// The former names still compile and mean the same (deprecated aliases).
func TestBrownoutNamesAreAliases(t *testing.T) {
	var o live.BrownoutOptions = live.SlowdownHedgingOptions{Clients: -1}
	if _, err := live.RunBrownout(context.Background(), o); !errors.Is(err, live.ErrScenario) {
		t.Errorf("RunBrownout = %v, want ErrScenario", err)
	}
	if p := live.BrownoutPolicies(); len(p) != 3 || p[1].Name != live.SlowdownHedge || live.BrownoutHedge != "hedge" {
		t.Errorf("BrownoutPolicies() = %+v", p)
	}
}
