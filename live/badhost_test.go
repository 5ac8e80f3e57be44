package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/live"
)

// badHostTestOptions is the bad-host run at a tenth of its timeline (7s,
// host 0 down from 2s to 5s, the breakers' window 1s and open period
// 200ms) with one client at 40 calls/s, light enough for -race on a
// loaded machine. With so few calls the breakers trip from 10 calls in
// their window (sim's 20 would never be reached by host 0's 12 attempts a
// second) and the budgets hold 2 tokens (sim's 10 would last most of a 3s
// outage): the same shape with smaller numbers, and the virtual run at
// the same parameters beside it.
func badHostTestOptions() live.BadHostOptions {
	ps := live.BadHostPolicies()
	for i := range ps {
		if ps[i].Breaker != nil {
			ps[i].Breaker.Window.MinCalls = 10
		}
		if ps[i].Budget != nil {
			ps[i].Budget.MaxTokens = 2
		}
	}
	return live.BadHostOptions{Clients: 1, Rate: 40, Scale: 0.1, Seed: 1, Policies: ps}
}

// TestLiveBadHostPerHostIsolation is issue #37 item 6 on loopback: with
// one of ten real servers down, a shared breaker fails the calls to the
// nine healthy ones while it is open and per-host breakers keep them at
// their level before the outage, isolating the bad host; a shared budget
// leaves the healthy hosts fewer retries than per-host budgets do. The
// figures are counts of calls and requests (never times), asserted with
// wide tolerances.
func TestLiveBadHostPerHostIsolation(t *testing.T) {
	rep, err := live.RunBadHost(context.Background(), badHostTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteTo(&b)
	t.Logf("\n%s\n%s", b.String(), rep.Verdict())
	row := func(name string) live.BadHostRow {
		r, ok := rep.Row(name)
		if !ok {
			t.Fatalf("no row %s", name)
		}
		if r.Healthy.Calls < 50 || r.Bad.Calls < 3 || r.HealthyBefore.Calls < 30 {
			t.Fatalf("%s: too few calls to judge: %+v", name, r)
		}
		return r
	}
	sb, pb := row("shared-breaker"), row("per-host-breaker")
	su, pu := row("shared-budget"), row("per-host-budget")

	if got, before := pb.Healthy.Success(), pb.HealthyBefore.Success(); got < before-0.03 {
		t.Errorf("per-host-breaker: healthy success %.3f during the outage, %.3f before: want within 3 points", got, before)
	}
	if got, before := sb.Healthy.Success(), sb.HealthyBefore.Success(); got > before-0.15 || got > pb.Healthy.Success()-0.15 {
		t.Errorf("shared-breaker: healthy success %.3f during the outage (%.3f before, per-host %.3f): want at least 15 points below both",
			got, before, pb.Healthy.Success())
	}
	if sb.HealthyWithinNoise() || !pb.HealthyWithinNoise() && pb.Healthy.Success() < 0.97 {
		t.Errorf("within noise: shared-breaker %v, per-host-breaker %v", sb.HealthyWithinNoise(), pb.HealthyWithinNoise())
	}
	// Without a breaker every call to host 0 makes its 3 attempts; the
	// per-host breaker refuses a good share of them.
	if pb.Bad.Refused < 1 || pb.Bad.AttemptsPerCall() > 2.5 {
		t.Errorf("per-host-breaker: host 0 not isolated: %.0f calls refused, %.2f attempts per call", pb.Bad.Refused, pb.Bad.AttemptsPerCall())
	}
	if got, before := pu.Healthy.RetriesPerFailure(), pu.HealthyBefore.RetriesPerFailure(); got < 0.85*before {
		t.Errorf("per-host-budget: healthy retries per failure %.2f during the outage, %.2f before: want at least 85%%", got, before)
	}
	if s, p := su.Healthy.RetriesPerFailure(), pu.Healthy.RetriesPerFailure(); s > 0.8*p {
		t.Errorf("shared-budget: healthy retries per failure %.2f, per-host %.2f: want at most 80%%", s, p)
	}
	// The virtual run at the same parameters shows the same shape.
	if v := sb.Virtual.Healthy.Success(); v > sb.VirtualNoFault.Healthy.Success()-0.15 {
		t.Errorf("virtual shared-breaker: healthy success %.3f, no fault %.3f", v, sb.VirtualNoFault.Healthy.Success())
	}
	if s, p := su.Virtual.Healthy.RetriesPerFailure(), pu.Virtual.Healthy.RetriesPerFailure(); s > 0.8*p {
		t.Errorf("virtual shared-budget: healthy retries per failure %.2f, per-host %.2f", s, p)
	}
	for _, want := range []string{"they lose it under shared-breaker", "per-host-breaker isolates host 0"} {
		if !strings.Contains(rep.Verdict(), want) {
			t.Errorf("verdict %q lacks %q", rep.Verdict(), want)
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Scenario string `json:"scenario"`
		Rows     []struct {
			Policy string `json:"policy"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js, &back); err != nil || back.Scenario != live.BadHostScenario || len(back.Rows) != 4 {
		t.Errorf("JSON %s: %v", js, err)
	}
	if s := rep.Sim(); len(s.Tables) != 1 || len(s.Verdict) != 1 || len(s.PolicyLegend) != 4 {
		t.Errorf("Sim() = %+v", s)
	}
}

func TestBadHostOptionsRefused(t *testing.T) {
	bad := []live.BadHostOptions{
		{Clients: -1}, {Rate: -1}, {Scale: -0.5}, {Scale: 11}, {Clients: 1000, Rate: 100}, {Scale: 10, Rate: 1000, Clients: 20},
	}
	for _, o := range bad {
		if _, err := live.RunBadHost(context.Background(), o); !errors.Is(err, live.ErrScenario) {
			t.Errorf("RunBadHost(%+v) = %v, want ErrScenario", o, err)
		}
	}
	m, err := live.BadHostOptions{Scale: 0.5}.Model()
	if err != nil || m.Duration.Seconds() != 35 || m.DownFrom.Seconds() != 10 || m.DownTo.Seconds() != 25 || m.Hosts != 10 {
		t.Errorf("Model() = %+v, %v", m, err)
	}
}

// A user's callback that panics inside a client's policy (here the
// breaker's ReadyToTrip, asked after every failure) ends the run: the
// calls started return, every server shuts down, and the panic goes on
// in RunBadHost's caller instead of killing the process from a call's
// goroutine (goleak, in TestMain, checks that nothing is left running).
func TestBadHostCallbackPanicGoesOnToTheCaller(t *testing.T) {
	ps := live.BadHostPolicies()[:1]
	br := *ps[0].Breaker
	br.Window = breaker.Window{}
	br.ReadyToTrip = func(breaker.Counts) bool { panic("ready-to-trip boom") }
	ps[0].Breaker = &br
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "ready-to-trip boom") {
			t.Errorf("recovered %v, want the callback's panic", v)
		}
	}()
	live.RunBadHost(context.Background(), live.BadHostOptions{Clients: 1, Rate: 50, Scale: 0.02, Seed: 1, Policies: ps})
	t.Error("RunBadHost returned; want the callback's panic")
}
