package sim

import (
	"context"
	"math"
	"strings"
	"testing"
)

func badHostRows(t *testing.T) map[string]hostsRow {
	t.Helper()
	out := map[string]hostsRow{}
	for _, p := range badHostPolicies() {
		r, _, err := runHostsRow(context.Background(), badHostModel(), p, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = r
	}
	return out
}

// Issue 37 item 6, one bad host among ten: with one breaker for every
// host, the dead host opens it and the calls to the nine healthy hosts
// fail while it is open; with the real keyed.Breakers, one per host, the
// healthy hosts keep their no-fault success (within the noise floor)
// and goodput, and the bad host is isolated (its breaker refuses most
// attempts). With one budget, the dead host's failures spend the
// retries of the others; with keyed.Budgets the healthy hosts still get
// theirs.
func TestOneBadHostPerHostBreakersAndBudgetsIsolateIt(t *testing.T) {
	rows := badHostRows(t)
	per, shared := rows["per-host-breaker"], rows["shared-breaker"]
	if !per.healthyWithinNoise() || math.Abs(per.Fault.HealthyGoodput-per.NoFault.HealthyGoodput) > 0.01*per.NoFault.HealthyGoodput {
		t.Errorf("per-host-breaker: healthy success %.4f (no fault %.4f, se %.4f), goodput %.0f/s (no fault %.0f/s): want the no-fault level",
			per.Fault.Healthy.Success(), per.NoFault.Healthy.Success(), per.HealthySuccessSE, per.Fault.HealthyGoodput, per.NoFault.HealthyGoodput)
	}
	if a := per.Fault.Bad.AttemptsPerCall(); a > 0.3 || per.Fault.Bad.Refused == 0 {
		t.Errorf("per-host-breaker: the bad host got %.2f attempts per call (%.0f refused), want it isolated (under 0.3)", a, per.Fault.Bad.Refused)
	}
	if s := shared.Fault.Healthy.Success(); s > 0.9 || shared.healthyWithinNoise() {
		t.Errorf("shared-breaker: healthy success %.3f during the outage, want the shared breaker failing them (under 90%%)", s)
	}
	pb, sb := rows["per-host-budget"], rows["shared-budget"]
	if !pb.healthyWithinNoise() || math.Abs(pb.Fault.Healthy.RetriesPerFailure()-pb.NoFault.Healthy.RetriesPerFailure()) > 0.05*pb.NoFault.Healthy.RetriesPerFailure() {
		t.Errorf("per-host-budget: healthy success %.4f (no fault %.4f), %.2f retries per failure (no fault %.2f): want the no-fault level",
			pb.Fault.Healthy.Success(), pb.NoFault.Healthy.Success(), pb.Fault.Healthy.RetriesPerFailure(), pb.NoFault.Healthy.RetriesPerFailure())
	}
	if r, n := sb.Fault.Healthy.RetriesPerFailure(), sb.NoFault.Healthy.RetriesPerFailure(); r > 0.8*n || sb.healthyWithinNoise() {
		t.Errorf("shared-budget: healthy hosts got %.2f retries per failure (no fault %.2f), want the bad host spending theirs", r, n)
	}
}

// The verdict is generated from the figures and says which policies
// keep the healthy hosts at their no-fault level.
func TestBadHostVerdictNamesThePolicies(t *testing.T) {
	sc, ok := Lookup("bad-host")
	if !ok {
		t.Fatal("no bad-host scenario")
	}
	rep, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Policies: []string{"shared-breaker", "per-host-breaker"}})
	if err != nil {
		t.Fatal(err)
	}
	v := strings.Join(rep.Verdict, " ")
	if !strings.Contains(v, "within the noise floor under per-host-breaker") || !strings.Contains(v, "lose it under shared-breaker") {
		t.Errorf("verdict %q", v)
	}
}
