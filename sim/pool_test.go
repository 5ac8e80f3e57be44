package sim

import (
	"reflect"
	"testing"
	"time"
)

// TestRunAfterRunMatchesAFreshRun: a run that takes the buffers an
// earlier run gave back (the queue's buckets, the payload slab, the
// lanes' rings, the attempts and calls) gives the same result as the
// same run made before them.
func TestRunAfterRunMatchesAFreshRun(t *testing.T) {
	m := Model{
		Clients: 20, Arrival: Arrival{Kind: Poisson, Rate: 50}, Duration: 3 * time.Second, Drain: time.Second,
		Tiers: []Tier{{Workers: 8, Queue: 50, Service: Exp(20 * time.Millisecond),
			Latency: Normal(2*time.Millisecond, 500*time.Microsecond), Timeout: 200 * time.Millisecond}},
		Faults: []Fault{{Kind: FaultLoss, Start: time.Second, End: 2 * time.Second, Prob: 0.3}},
	}
	other := m
	other.Clients, other.Tiers = 60, []Tier{{Workers: 2, Queue: 500, Service: Exp(50 * time.Millisecond),
		Latency: Normal(time.Millisecond, 100*time.Microsecond), Timeout: time.Second}}
	p, err := StandardPolicy(PolicyBudget, PolicyParams{Base: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first, err := Run(&m, Single(p), 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(&other, Single(p), 8); err != nil { // grows and gives back larger buffers
		t.Fatal(err)
	}
	again, err := Run(&m, Single(p), 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, again) {
		t.Errorf("a run after another differs from the same run before it:\n%+v\n%+v", first.Metrics, again.Metrics)
	}
	o1, _ := RunOCC(OCC{Clients: 50, Backoff: occStrategy(PolicyFull)}, 3)
	if _, err := RunOCC(OCC{Clients: 200, Backoff: occStrategy(PolicyEqual)}, 4); err != nil {
		t.Fatal(err)
	}
	if o2, _ := RunOCC(OCC{Clients: 50, Backoff: occStrategy(PolicyFull)}, 3); o1 != o2 {
		t.Errorf("RunOCC after another: %+v, before it %+v", o2, o1)
	}
}

// TestRunOCCReusesItsBuffers: the thousands of short trials of aws-occ
// take the queue's buckets and the Sim's slabs of the trials before
// them instead of growing their own (issue #36: 139 allocations a run
// before, 69 with them).
func TestRunOCCReusesItsBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	m := OCC{Clients: 100, Backoff: occStrategy(PolicyFull)}
	seed := uint64(0)
	a := testing.AllocsPerRun(50, func() {
		seed++
		if _, err := RunOCC(m, seed); err != nil {
			t.Fatal(err)
		}
	})
	if a > 100 {
		t.Errorf("RunOCC: %.0f allocations a run, want at most 100 (buffers of earlier runs reused)", a)
	}
}
