package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// runScenario runs built-in scenario name. A run that changes the
// workload (Clients or Duration) is no default
// figure: unless it asks for trials it runs one, which keeps the suite
// quick under the race detector; runs of the default workload keep the
// scenario's trials, whose means the READMEs quote.
func runScenario(t *testing.T, name string, o Options) *Report {
	t.Helper()
	if o.Trials == 0 && (o.Clients != 0 || o.Duration != 0) {
		o.Trials = 1
	}
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	rep, err := sc.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func row(t *testing.T, c Case, policy string) *Metrics {
	t.Helper()
	for _, r := range c.Rows {
		if r.Policy == policy {
			return r.Metrics
		}
	}
	t.Fatalf("case %s has no policy %s", c.Name, policy)
	return nil
}

// retry-budget: with independent failures of probability p, three
// immediate retries succeed with probability 1-p⁴ and make 1+p+p²+p³
// attempts per call; no retries succeed with 1-p and make exactly 1.
func TestRetryBudgetClosedForms(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "retry-budget", Options{Seed: 7})
	probs := []float64{0.01, 0.10, 0.20, 0.50, 0.75}
	if len(rep.Cases) != len(probs)+3 { // then the client sweep
		t.Fatalf("%d cases", len(rep.Cases))
	}
	for i, p := range probs {
		c := rep.Cases[i]
		none, imm := row(t, c, PolicyNoRetry), row(t, c, PolicyImmediate)
		n := none.Calls
		check := func(what string, got, want, sd float64) {
			t.Helper()
			if math.Abs(got-want) > 4*sd/math.Sqrt(n)+1e-9 {
				t.Errorf("p=%v %s: %.4f, want %.4f ± %.4f", p, what, got, want, 4*sd/math.Sqrt(n))
			}
		}
		check("no-retry success", none.SuccessRate, 1-p, math.Sqrt(p*(1-p)))
		if none.AttemptsPerCall != 1 {
			t.Errorf("p=%v no-retry load %v", p, none.AttemptsPerCall)
		}
		q := math.Pow(p, 4)
		check("immediate success", imm.SuccessRate, 1-q, math.Sqrt(q*(1-q)))
		load := 1 + p + p*p + p*p*p
		// Attempts per call: 1 + Geometric truncated at 3 retries.
		var m2 float64
		for k := 1; k <= 4; k++ {
			pk := math.Pow(p, float64(k-1)) * (1 - p)
			if k == 4 {
				pk = math.Pow(p, 3)
			}
			m2 += float64(k*k) * pk
		}
		check("immediate load", imm.AttemptsPerCall, load, math.Sqrt(m2-load*load))

		// The token bucket and the retry breaker never do worse than no
		// retries, and never more work than plain retries.
		for _, name := range []string{"token-bucket", "retry-breaker"} {
			x := row(t, c, name)
			if x.SuccessRate < none.SuccessRate-0.01 || x.AttemptsPerCall > imm.AttemptsPerCall+0.01 {
				t.Errorf("p=%v %s: success %.3f load %.3f", p, name, x.SuccessRate, x.AttemptsPerCall)
			}
		}
	}
	// At high failure rates the bucket caps the load near 1.1 while
	// retries triple it.
	hi := rep.Cases[4]
	if tb := row(t, hi, "token-bucket").AttemptsPerCall; tb > 1.15 {
		t.Errorf("token bucket load %.3f at p=75%%, want ≤ 1.15", tb)
	}
	if rb := row(t, hi, "retry-breaker").AttemptsPerCall; rb > 1.3 {
		t.Errorf("retry breaker load %.3f at p=75%%, want ≤ 1.3", rb)
	}
}

// aws-occ: the published shape. Full and decorrelated jitter do far less
// work than backoff without jitter; equal jitter is no cheaper than full
// jitter and takes longer; decorrelated does a little more work than full
// but finishes sooner; no backoff at all is the most work.
func TestAWSOCCShape(t *testing.T) {
	fullModel(t)
	const trials = 150
	stats := map[string]OCCStats{}
	for _, p := range occPolicies {
		var st OCCStats
		for i := 0; i < trials; i++ {
			r, err := RunOCC(OCC{Clients: 100, Backoff: occStrategy(p)}, unitSeed(3, 0, i))
			if err != nil || !r.Done {
				t.Fatalf("%s trial %d: %v done=%v", p, i, err, r.Done)
			}
			st.MeanCalls += float64(r.Calls) / trials
			st.MeanCompletionMS += ms(r.Completion) / trials
		}
		stats[p] = st
		t.Logf("%-13s calls %6.0f completion %8.0fms", p, st.MeanCalls, st.MeanCompletionMS)
	}
	calls := func(p string) float64 { return stats[p].MeanCalls }
	done := func(p string) float64 { return stats[p].MeanCompletionMS }
	none := calls(PolicyExponential)
	if calls(PolicyFull) > 0.6*none || calls(PolicyDecorrelated) > 0.7*none || calls(PolicyEqual) > 0.7*none {
		t.Errorf("jitter does not save work: full %.0f decorrelated %.0f equal %.0f vs no jitter %.0f",
			calls(PolicyFull), calls(PolicyDecorrelated), calls(PolicyEqual), none)
	}
	if calls(PolicyEqual) < 0.97*calls(PolicyFull) {
		t.Errorf("equal jitter (%.0f calls) does clearly less work than full jitter (%.0f)", calls(PolicyEqual), calls(PolicyFull))
	}
	if done(PolicyEqual) < 1.15*done(PolicyFull) {
		t.Errorf("equal jitter finishes in %.0fms, not clearly later than full jitter's %.0fms", done(PolicyEqual), done(PolicyFull))
	}
	if calls(PolicyDecorrelated) < 1.05*calls(PolicyFull) || done(PolicyDecorrelated) > 0.95*done(PolicyFull) {
		t.Errorf("decorrelated: %.0f calls in %.0fms vs full %.0f in %.0fms; want more work, less time",
			calls(PolicyDecorrelated), done(PolicyDecorrelated), calls(PolicyFull), done(PolicyFull))
	}
	if calls(PolicyImmediate) < 1.1*none || done(PolicyExponential) < 5*done(PolicyFull) {
		t.Errorf("no backoff %.0f calls vs %.0f; no jitter finishes in %.0fms vs full %.0fms",
			calls(PolicyImmediate), none, done(PolicyExponential), done(PolicyFull))
	}
}

func TestAWSOCCScenarioReport(t *testing.T) {
	rep := runScenario(t, "aws-occ", Options{Seed: 1, Trials: 20, Clients: 20, Policies: []string{"full", "no-jitter"}})
	if len(rep.Cases) != 1+len(occSweep) || len(rep.Cases[0].Rows) != 2 {
		t.Fatalf("%d cases, %d rows", len(rep.Cases), len(rep.Cases[0].Rows))
	}
	st := rep.Cases[0].Rows[0].OCC
	if rep.Cases[0].Rows[0].Policy != PolicyFull || st.Clients != 20 || st.Trials != 20 || st.MeanCalls < 20 {
		t.Fatalf("first row %+v", rep.Cases[0].Rows[0])
	}
	if len(rep.Tables) != 2 || len(rep.Plots) != 2 || rep.Tables[0].Rows[1][0] != "no jitter" {
		t.Fatalf("tables %v", rep.Tables)
	}
	if _, err := (newOCCScenario()).Run(context.Background(), Options{Policies: []string{"full+budget"}}); !errors.Is(err, ErrPolicy) {
		t.Fatalf("a budget policy in the OCC model: %v", err)
	}
}

// metastable: after the blip, retrying without a budget keeps the database
// overloaded; no retries, and retries under a budget, recover.
func TestMetastableStuckVersusRecovered(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "metastable", Options{Seed: 1, Duration: 70 * time.Second,
		Policies: []string{PolicyNoRetry, PolicyImmediate, PolicyFull, PolicyBudget, PolicyGuarded}})
	c := rep.Cases[0]
	for _, p := range []string{PolicyNoRetry, PolicyBudget, PolicyGuarded} {
		if x := row(t, c, p); x.Recovered != 1 || x.RecoveryS > 10 {
			t.Errorf("%s: recovered %v after %.1fs, want recovery within 10s", p, x.Recovered, x.RecoveryS)
		}
	}
	for _, p := range []string{PolicyImmediate, PolicyFull} {
		x := row(t, c, p)
		if x.Recovered != 0 || x.AttemptsPerCall < 2 {
			t.Errorf("%s: recovered %v with %.2f attempts per call, want stuck in overload", p, x.Recovered, x.AttemptsPerCall)
		}
	}
	if n, b := row(t, c, PolicyNoRetry), row(t, c, PolicyImmediate); b.Goodput > n.Goodput/2 {
		t.Errorf("goodput %.0f/s with retries vs %.0f/s without: the overload should halve it", b.Goodput, n.Goodput)
	}
}

// cascade: retries at every hop multiply on the database; one retrying hop
// does far less; budgets at every hop keep load near one attempt per call
// and recover.
func TestCascadeAmplification(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "cascade", Options{Seed: 1, Duration: 60 * time.Second})
	c := rep.Cases[0]
	every, one, budg := row(t, c, "retry-every-tier"), row(t, c, "retry-at-one-tier"), row(t, c, "budget-every-tier")
	if every.AttemptsPerCall < 3*one.AttemptsPerCall || every.AttemptsPerCall < 16 {
		t.Errorf("database attempts per call: every tier %.1f, one tier %.1f", every.AttemptsPerCall, one.AttemptsPerCall)
	}
	if budg.AttemptsPerCall > 1.5 || budg.Recovered != 1 || budg.SuccessRate <= every.SuccessRate {
		t.Errorf("budgets: %.2f attempts per call, recovered %v, success %.2f (every tier %.2f)",
			budg.AttemptsPerCall, budg.Recovered, budg.SuccessRate, every.SuccessRate)
	}
}

// packet-loss: without retries the calls lost are exactly the loss rate
// over the loss window; retries recover nearly all of them.
func TestPacketLossSuccess(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "packet-loss", Options{Seed: 1, Clients: 10, Policies: []string{PolicyNoRetry, PolicyImmediate, PolicyBudget}})
	c := rep.Cases[0]
	none := row(t, c, PolicyNoRetry)
	want := 1 - 0.10*20.0/50
	if math.Abs(none.SuccessRate-want) > 4*math.Sqrt(want*(1-want)/none.Calls) {
		t.Errorf("no-retry success %.4f, want %.4f", none.SuccessRate, want)
	}
	for _, p := range []string{PolicyImmediate, PolicyBudget} {
		if x := row(t, c, p); x.SuccessRate < 0.999 || x.PeakInFlight <= none.PeakInFlight*0.9 {
			t.Errorf("%s: success %.4f, peak in flight %v (no-retry %v)", p, x.SuccessRate, x.PeakInFlight, none.PeakInFlight)
		}
	}
}

// gateway-restart: three immediate retries (no more: the scenario's
// unlimited attempt count does not apply to the immediate policy) all land
// inside the 3s of 503s, so the reports of those 3s out of 60 are lost
// (success 1-3/60). Backoff
// from 1s carries every report through; the 1,500 reports missed during
// the restart then drain at the collector's spare 250/s, so recovery takes
// about 1500/250 = 6s whatever the jitter. Without jitter, the retries of
// the requests the restart dropped together come back together.
func TestGatewayRestart(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "gateway-restart", Options{Seed: 1})
	c := rep.Cases[0]
	imm, full, exp := row(t, c, PolicyImmediate), row(t, c, PolicyFull), row(t, c, PolicyExponential)
	// Immediate retries in a report queue whose policy never waits: each
	// agent redelivers as fast as the network lets it while the collector
	// answers 503 at once, a storm of many times the steady load; the
	// reports still all get through afterwards.
	if imm.Amplification < 10 || imm.ReportsDelivered < 0.999 {
		t.Errorf("immediate: %.1fx peak, %.4f of reports delivered; want a storm, then every report delivered", imm.Amplification, imm.ReportsDelivered)
	}
	for _, p := range []string{PolicyExponential, PolicyEqual, PolicyFull, PolicyBudget} {
		x := row(t, c, p)
		if x.SuccessRate < 0.98 || x.ReportsDelivered < 0.999 {
			t.Errorf("%s: success %.3f, %.4f of reports delivered; agents retry until they get through", p, x.SuccessRate, x.ReportsDelivered)
		}
		if x.Recovered != 1 || x.RecoveryS < 4.5 || x.RecoveryS > 7.5 {
			t.Errorf("%s: recovery %.1fs (recovered %v), want about 6s", p, x.RecoveryS, x.Recovered)
		}
	}
	if exp.SyncShare <= full.SyncShare || exp.SyncShare < 0.01 {
		t.Errorf("share of retries in spikes: no jitter %.3f, full jitter %.3f", exp.SyncShare, full.SyncShare)
	}
}

// The same seed gives byte-identical JSON, whatever the parallelism; a
// different seed gives different numbers.
func TestReportJSONIsDeterministic(t *testing.T) {
	fullModel(t)
	encode := func(seed uint64, workers int) []byte {
		rep := runScenario(t, "retry-budget", Options{Seed: seed, Workers: workers, Trials: 2, Clients: 10})
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := encode(9, 1), encode(9, 3)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different JSON")
	}
	if bytes.Equal(a, encode(10, 2)) {
		t.Fatal("different seeds, same JSON")
	}
	if want := fmt.Sprintf(`"model_version":%d`, ModelVersion); !strings.Contains(string(a), want) {
		t.Errorf("JSON lacks %s: %.200s", want, a)
	}
	if !strings.Contains(string(a), `"scenario":"retry-budget"`) || !strings.Contains(string(a), `"success_rate"`) {
		t.Fatalf("JSON lacks fields: %.200s", a)
	}
}

func TestScenarioRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc, _ := Lookup("aws-occ")
	if _, err := sc.Run(ctx, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestProgressReportsEveryUnit(t *testing.T) {
	var calls, last, total int
	runScenario(t, "retry-budget", Options{Seed: 1, Clients: 5, Trials: 2, Progress: func(d, n int) { calls++; last, total = d, n }})
	if total != 5*6*2 || last != total || calls != total {
		t.Fatalf("progress %d calls, last %d/%d", calls, last, total)
	}
}

func TestBuiltinScenarios(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range Scenarios() {
		if sc.Name == "" || sc.Title == "" || len(sc.Doc) < 200 || len(sc.Policies) == 0 || names[sc.Name] {
			t.Errorf("scenario %q is incomplete or duplicated", sc.Name)
		}
		names[sc.Name] = true
		for _, p := range sc.Policies {
			if !sc.KnownPolicy(p) {
				t.Errorf("%s: default policy %s unknown", sc.Name, p)
			}
		}
	}
	for _, n := range []string{"aws-occ", "retry-budget", "gateway-restart", "packet-loss", "metastable", "cascade"} {
		if !names[n] {
			t.Errorf("missing scenario %s", n)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found a scenario that does not exist")
	}
}
