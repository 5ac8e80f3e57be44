package live

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// The live gateway-restart and its virtual twin (the same model in
// virtual time, RunVirtual) agree on each backoff policy's peak and
// recovery within 20% (recovery within 0.5s when it is under a few
// seconds, where 20% is less than the live run's sampling). Immediate
// retries are left out: without backoff an agent's queue redelivers as
// fast as the network allows, which in virtual time (100µs legs) is far
// faster than the live harness on a small machine can send (README).
func TestVirtualTwinAgreesWithTheLiveGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20s live run")
	}
	sc := GatewayRestart()
	o := Options{Seed: 1, Clients: 200, Policies: []string{"exponential", "full", "full+budget", "full+budget+breaker"}}
	v, err := RunVirtual(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Run(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range v.Cases[0].Rows {
		lr := l.Rows[i]
		if lr.Extra.StartLagMaxMS > float64(LagWarning.Milliseconds()) {
			t.Skipf("the machine did not keep up (calls started up to %.0fms late): a live figure would measure the harness", lr.Extra.StartLagMaxMS)
		}
		vm, lm := r.Metrics, lr.Metrics
		if d := math.Abs(vm.Amplification-lm.Amplification) / lm.Amplification; d > 0.2 {
			t.Errorf("%s: peak× virtual %.2f, live %.2f: %.0f%% apart", r.Policy, vm.Amplification, lm.Amplification, 100*d)
		}
		if d := math.Abs(vm.RecoveryS - lm.RecoveryS); d > max(0.2*lm.RecoveryS, 0.5) || vm.Recovered != lm.Recovered {
			t.Errorf("%s: recovery virtual %.2fs (%v), live %.2fs (%v)", r.Policy, vm.RecoveryS, vm.Recovered, lm.RecoveryS, lm.Recovered)
		}
		// A refused retry delays reports: none is lost to a full queue,
		// and by the end nearly all are delivered (a breaker's open
		// periods leave a few pending).
		if vm.ReportsDropped > 0 || lm.ReportsDropped > 0 || vm.ReportsDelivered < 0.95 || lm.ReportsDelivered < 0.95 {
			t.Errorf("%s: reports delivered virtual %.4f, live %.4f, dropped %.4f and %.4f", r.Policy,
				vm.ReportsDelivered, lm.ReportsDelivered, vm.ReportsDropped, lm.ReportsDropped)
		}
	}
}

// The live queue is recorded at every change, as the simulator records
// it: a peak shorter than the sampling interval still shows (sampled
// every 100ms, a queue of 5 that lasts a millisecond was missed).
func TestQueueGaugeFollowsEveryChange(t *testing.T) {
	rec := newRecorder(time.Now(), 10*time.Millisecond, time.Second)
	for range 5 {
		rec.queueChanged(1)
	}
	for range 5 {
		rec.queueChanged(-1)
	}
	raw := rec.finish()
	var peak int32
	for _, q := range raw.rec.Queue {
		peak = max(peak, q)
	}
	if peak != 5 {
		t.Fatalf("queue peak %d, want 5", peak)
	}
	if rec.waiting != 0 {
		t.Fatalf("%d still waiting", rec.waiting)
	}
}

// Each fault means in the live lab what it means in sim: a latency fault
// slows the network, outside the workers (the caller times out before the
// server ever takes the request, and no execution is cut); a slow fault
// holds the worker (executions are cut by their callers' timeouts); with
// IgnoreCancel the server keeps serving requests whose callers left, even
// queued ones (before, the injector dropped them from its queue); and a
// capacity cut rounds as sim.CapacityWorkers does.
func TestFaultsMeanWhatTheyMeanInSim(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	base := Scenario{
		Name: "meaning", Clients: 10, Arrival: sim.Arrival{Kind: sim.Periodic, Interval: ms(100)},
		Duration: ms(1000), CallTimeout: time.Second,
		Server:   Server{Limit: faultinject.Limit{Concurrency: 2, Queue: 50}, Service: sim.Const(ms(5)), Timeout: ms(100)},
		Policies: []string{sim.PolicyNoRetry},
	}
	run := func(sc Scenario) Row {
		t.Helper()
		rep, err := Run(context.Background(), sc, Options{SampleEvery: ms(10)})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Rows[0]
	}
	lat := base
	lat.Faults = []sim.Fault{{Kind: sim.FaultLatency, Start: ms(200), End: ms(500), Extra: sim.Const(ms(300))}}
	r := run(lat)
	if r.Extra.Wasted.Cancelled != 0 || r.Metrics.Succeeded == r.Metrics.Calls {
		t.Errorf("latency: %d executions cut, %v of %v calls succeeded; want none cut (the network is slow, not the server) and the window's calls failed",
			r.Extra.Wasted.Cancelled, r.Metrics.Succeeded, r.Metrics.Calls)
	}
	slow := base
	slow.Faults = []sim.Fault{{Kind: sim.FaultSlow, Start: ms(200), End: ms(500), Extra: sim.Const(ms(300))}}
	if r := run(slow); r.Extra.Wasted.Cancelled == 0 {
		t.Error("slow: no execution cut by its caller's timeout")
	}
	slow.Server.IgnoreCancel = true
	if r := run(slow); r.Extra.Server.Canceled != 0 || r.Extra.Wasted.WastedS == 0 || r.Extra.Wasted.Abandoned == 0 {
		t.Errorf("slow, ignoring cancellation: the injector dropped %d queued requests, %.2fs wasted, %d abandoned executions; want none dropped and the queued ones served after their callers left",
			r.Extra.Server.Canceled, r.Extra.Wasted.WastedS, r.Extra.Wasted.Abandoned)
	}
	for _, c := range []struct {
		w      int
		f      float64
		expect int
	}{{10, 0.25, 3}, {10, 0.2, 2}, {3, 0.1, 1}, {20, 0.5, 10}, {5, 0, 0}} {
		if got := sim.CapacityWorkers(c.w, c.f); got != c.expect {
			t.Errorf("CapacityWorkers(%d, %v) = %d, want %d", c.w, c.f, got, c.expect)
		}
	}
}

// A live server's queue keeps its meaning in the virtual twin: faultinject's
// 0 (no queue) becomes sim's -1, a bounded queue keeps its length, and
// unlimited workers stay unlimited.
func TestSimModelKeepsTheServersQueue(t *testing.T) {
	for _, tc := range []struct {
		limit          faultinject.Limit
		workers, queue int
	}{
		{faultinject.Limit{Concurrency: 2}, 2, -1},
		{faultinject.Limit{Concurrency: 2, Queue: 7}, 2, 7},
		{faultinject.Limit{}, 0, -1},
	} {
		sc := GatewayRestart()
		sc.Server.Limit = tc.limit
		tier := sc.SimModel().Tiers[0]
		if tier.Workers != tc.workers || tier.Queue != tc.queue {
			t.Errorf("Limit %+v: virtual tier has %d workers and queue %d, want %d and %d", tc.limit, tier.Workers, tier.Queue, tc.workers, tc.queue)
		}
	}
}
