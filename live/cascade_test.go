package live_test

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stormguard/stormguard/live"
)

// Issue #20, live: three real loopback tiers (tier 1 → tier 2 → bottom),
// each behind layer.Middleware and calling the next through httpretry,
// the bottom failing for a window. Per client call started in the window,
// naive retries at every tier (4 attempts each) multiply the bottom's
// load by at least 30×; the layer rule keeps it at most 4.5×; the layer
// rule with the overload marker and a budget at most 1.5×. Bounded: 20
// callers each calling every 200ms, 3s (the bottom failing for 2s), at
// most 1500 calls per policy, no backoff.
func TestCascadeAmplification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := live.RunCascade(ctx, live.CascadeOptions{
		Clients:   20,
		Duration:  3 * time.Second,
		FailStart: 500 * time.Millisecond,
		FailEnd:   2500 * time.Millisecond,
		Interval:  200 * time.Millisecond,
		MaxCalls:  1500,
		// Room for a naive call's 84 requests on a loaded machine.
		CallTimeout: 15 * time.Second,
		// The outage as each call sees it, so that a loaded machine's
		// slow calls straddling the window's end do not blur the bounds.
		WholeCalls: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.WriteTo(os.Stdout)
	// A harness that starts calls late is drowning in the naive storm's
	// requests: its calls run into their deadline before they make them
	// all (9.2x at a load average of 14, every p50 at 15s), so the figure
	// measures the machine (as TestBrownoutHedging skips).
	for _, row := range rep.Rows {
		if row.StartLagMax > 250*time.Millisecond {
			t.Skipf("%s: the callers started calls up to %s late: the machine is too loaded to judge", row.Policy.Name, row.StartLagMax)
		}
	}
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{live.CascadeNaive, 30, 64},
		{live.CascadeLayer, 1, 4.5},
		{live.CascadeMarker, 1, 1.5},
	} {
		row, ok := rep.Row(c.name)
		if !ok {
			t.Fatalf("no row %s", c.name)
		}
		if row.FaultCalls < 10 {
			t.Errorf("%s: only %d calls in the failure window", c.name, row.FaultCalls)
			continue
		}
		if a := row.Amplification[2]; a < c.min || a > c.max {
			t.Errorf("%s: bottom amplification %.2f×, want within [%v, %v]", c.name, a, c.min, c.max)
		}
		if row.FaultSuccess >= row.Success {
			t.Errorf("%s: success %.2f overall, %.2f in the window: the window should fail calls", c.name, row.Success, row.FaultSuccess)
		}
		for i := 1; i < 3; i++ {
			if row.Amplification[i] < row.Amplification[i-1]-1e-9 {
				t.Errorf("%s: tier %d amplification %.2f below the tier above's %.2f", c.name, i+1, row.Amplification[i], row.Amplification[i-1])
			}
		}
	}
}

// Options out of bounds are refused before any server starts.
func TestCascadeOptionsValidate(t *testing.T) {
	for _, o := range []live.CascadeOptions{
		{Clients: -1},
		{Clients: live.DefaultMaxClients + 1},
		{Duration: live.MaxDuration + time.Second},
		{Duration: time.Second, FailStart: 2 * time.Second, FailEnd: 3 * time.Second},
		{FailStart: time.Second, FailEnd: time.Second},
		{Attempts: live.MaxCascadeAttempts + 1},
		{Backoff: -time.Second},
		{MaxCalls: -1},
		{Policies: []live.CascadePolicy{}},
	} {
		if _, err := live.RunCascade(context.Background(), o); !errors.Is(err, live.ErrScenario) {
			t.Errorf("RunCascade(%+v) = %v, want ErrScenario", o, err)
		}
	}
}

// The default outage fails requests by when they arrive: calls before and
// after the window succeed, calls in it fail, and the layer rule's bound
// holds whatever the machine's timing (at most 4 requests at any tier per
// call).
func TestCascadeOutageByTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := live.RunCascade(ctx, live.CascadeOptions{
		Clients:  5,
		Duration: 1500 * time.Millisecond,
		Interval: 20 * time.Millisecond,
		MaxCalls: 500,
		Policies: []live.CascadePolicy{live.CascadePolicies()[1]},
	})
	if err != nil {
		t.Fatal(err)
	}
	row := rep.Rows[0]
	t.Logf("%+v", row)
	if row.FaultCalls == 0 || row.FaultCalls == row.Calls {
		t.Fatalf("%d of %d calls in the window", row.FaultCalls, row.Calls)
	}
	if row.Success <= row.FaultSuccess || row.Success == 0 {
		t.Errorf("success %.2f overall, %.2f in the window", row.Success, row.FaultSuccess)
	}
	for i, a := range row.Amplification {
		if a < 1 || a > 4 {
			t.Errorf("tier %d: %.2f requests per call, want within [1, 4]", i+1, a)
		}
	}
	if row.Requests[2] < int64(row.Calls) {
		t.Errorf("the bottom got %d requests for %d calls", row.Requests[2], row.Calls)
	}
}

// The callers' schedule is open loop: every policy meets the same calls,
// so success compares across rows. A closed loop let a fleet that fails
// fast start more calls, and its success read lower than naive retries'
// (66.4% against 92.9%) as if the guards lost calls.
func TestCascadeSuccessComparesAcrossPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := live.RunCascade(ctx, live.CascadeOptions{
		Clients: 5, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond,
		FailStart: 500 * time.Millisecond, FailEnd: time.Second, WholeCalls: true,
		CallTimeout: 15 * time.Second, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.WriteTo(os.Stdout)
	first := rep.Rows[0]
	for _, row := range rep.Rows {
		if row.Calls != first.Calls || row.FaultCalls != first.FaultCalls || row.Calls == 0 || row.FaultCalls == 0 {
			t.Errorf("%s: %d calls, %d in the fault; %s: %d and %d: every policy must meet the same schedule",
				row.Policy.Name, row.Calls, row.FaultCalls, first.Policy.Name, first.Calls, first.FaultCalls)
		}
		// Every call in the window fails and every other succeeds, whatever
		// the policy: the same share for all.
		if want := 1 - float64(row.FaultCalls)/float64(row.Calls); math.Abs(row.Success-want) > 1e-9 || row.FaultSuccess != 0 {
			t.Errorf("%s: success %.3f (in fault %.3f), want %.3f", row.Policy.Name, row.Success, row.FaultSuccess, want)
		}
	}
}

// CascadeOptions.Scope PerClient gives every caller its own budget: with
// the bottom failing to the end, the shared fleet's retries stop when its
// one bucket is spent, the per-client fleet's when each of the five
// callers' buckets is.
func TestCascadeScopeGivesEachCallerItsBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	extra := map[live.Scope]int64{}
	for _, scope := range []live.Scope{live.Shared, live.PerClient} {
		rep, err := live.RunCascade(ctx, live.CascadeOptions{
			Clients: 5, Interval: 50 * time.Millisecond, Duration: time.Second,
			FailStart: 200 * time.Millisecond, FailEnd: time.Second, WholeCalls: true, Scope: scope,
			Policies: []live.CascadePolicy{{Name: "layer-rule+budget", Budget: true}},
		})
		if err != nil {
			t.Fatal(err)
		}
		row := rep.Rows[0]
		extra[scope] = row.FaultRequests[0] - int64(row.FaultCalls) // the callers' retries
		if rep.Options.Scope != scope {
			t.Errorf("report's scope %v, want %v", rep.Options.Scope, scope)
		}
	}
	if extra[live.Shared] < 1 || extra[live.Shared] > 12 || extra[live.PerClient] < 3*extra[live.Shared] {
		t.Errorf("callers' retries in the fault: %d shared (want what one bucket holds, at most 10), %d per client (want five buckets' worth)",
			extra[live.Shared], extra[live.PerClient])
	}
}
