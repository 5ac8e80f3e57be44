package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestCommasAndFaultSpan(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 5000: "5,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := Commas(n); got != want {
			t.Errorf("Commas(%d) = %q, want %q", n, got, want)
		}
	}
	f := Fault{Start: 10 * time.Second, End: 30 * time.Second}
	for d, want := range map[time.Duration]string{
		60 * time.Second: "for 20s",
		12 * time.Second: "for 2s (cut from 20s by the 12s run)",
		8 * time.Second:  "never (planned at 10s-30s, after the 8s run ends)",
	} {
		if got := FaultSpan(f, d); got != want {
			t.Errorf("FaultSpan(%v) = %q, want %q", d, got, want)
		}
	}
}

// Titles describe the model as run: the client count and the fault as the
// run's duration cuts it, not the defaults' fixed text.
func TestTitlesFollowTheModelAsRun(t *testing.T) {
	fullModel(t)
	for _, tc := range []struct {
		scenario string
		o        Options
		want     []string
	}{
		{"gateway-restart", Options{}, []string{"5,000 agents", "503 for 3s"}},
		{"gateway-restart", Options{Clients: 500}, []string{"500 agents", "503 for 3s"}},
		// A run that ends before its fault starts is refused
		// (TestFaultAfterTheRunIsRefused).
		{"gateway-restart", Options{Clients: 50, Duration: 21 * time.Second}, []string{"50 agents", "503 for 1s (cut from 3s by the 21s run)"}},
		{"packet-loss", Options{Duration: 12 * time.Second}, []string{"5,000 QPS", "lost for 2s (cut from 20s by the 12s run)"}},
		{"packet-loss", Options{Clients: 10, Duration: 12 * time.Second}, []string{"1,000 QPS"}},
		{"metastable", Options{Clients: 20, Duration: 25 * time.Second}, []string{"187% load", "blip for 5s (cut from 10s"}},
		{"cascade", Options{Clients: 10, Duration: 25 * time.Second}, []string{"database at 50% capacity or down for 5s (cut from 30s"}},
	} {
		sc, ok := Lookup(tc.scenario)
		if !ok {
			t.Fatal(tc.scenario)
		}
		if tc.o.Clients == 0 && tc.o.Duration == 0 && !strings.Contains(sc.Title, tc.want[0]) {
			t.Errorf("%s: listing title %q", tc.scenario, sc.Title)
		}
		rep, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Clients: tc.o.Clients, Duration: tc.o.Duration, Policies: sc.Policies[:1]})
		if err != nil {
			t.Fatalf("%s %+v: %v", tc.scenario, tc.o, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(rep.Title, w) {
				t.Errorf("%s %+v: title %q lacks %q", tc.scenario, tc.o, rep.Title, w)
			}
		}
		if (tc.o.Clients > 0 || tc.o.Duration > 0) && !strings.HasPrefix(rep.Description, "As run: ") {
			t.Errorf("%s %+v: description does not say the run differs from its text: %q", tc.scenario, tc.o, rep.Description[:60])
		}
	}
}

func TestAWSOCCRefusesADuration(t *testing.T) {
	sc, _ := Lookup("aws-occ")
	_, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 2, Clients: 5, Duration: time.Second})
	if !errors.Is(err, ErrIgnoredOption) || !errors.Is(err, ErrScenario) {
		t.Fatalf("err = %v, want ErrIgnoredOption", err)
	}
}

func TestSyncAndKurtosisCellsSayWhatTheyRestOn(t *testing.T) {
	few := Metrics{Retries: 10, SyncShare: 0.5}
	if got := syncCell(&few); got != "–" {
		t.Errorf("10 retries: %q, want –", got)
	}
	many := Metrics{Retries: 1200, SyncShare: 0.241}
	if got := syncCell(&many); got != "24.1% of 1,200" {
		t.Errorf("1,200 retries: %q", got)
	}
	// Poisson counts at λ per bucket have kurtosis 3 + 1/λ: a steady
	// stream of 10 calls/s in 10ms buckets (λ = 0.1) reads about 13.
	m := Model{Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 1}, Duration: 2000 * time.Second, Tiers: []Tier{{}}}
	r, err := Run(&m, Single(Policy{Name: "none", MaxAttempts: 1}), 1)
	if err != nil {
		t.Fatal(err)
	}
	x := r.Metrics
	if x.KurtosisPoisson < 12.9 || x.KurtosisPoisson > 13.1 {
		t.Fatalf("Poisson expectation %v, want 3 + 1/0.1 = 13", x.KurtosisPoisson)
	}
	if d := x.Kurtosis - x.KurtosisPoisson; d < -1 || d > 1 {
		t.Fatalf("steady Poisson load: kurtosis %v against its expectation %v", x.Kurtosis, x.KurtosisPoisson)
	}
	if got := kurtosisCell(&x); !strings.Contains(got, "(13.0)") {
		t.Errorf("cell %q does not show the expectation", got)
	}
}

// peak× has a Poisson noise floor: the report gives it beside the table,
// measured on the same workload with no fault and no retries.
func TestReportsThePeakNoiseFloor(t *testing.T) {
	model := Model{
		Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 1}, Duration: 60 * time.Second, Warmup: time.Second,
		Tiers:  []Tier{{Workers: 20, Service: Const(10 * time.Millisecond)}},
		Faults: []Fault{{Kind: FaultUnavailable, Start: 20 * time.Second, End: 25 * time.Second}},
	}
	sc, err := NewModelScenario(ModelSpec{Name: "floor", Model: model, Policies: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.Run(context.Background(), Options{Seed: 7, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	floor := rep.Cases[0].AmpNoiseFloor
	quiet := model
	quiet.Faults, quiet.windows = nil, model.Faults // measured over the case's windows
	r, err := Run(&quiet, Single(Policy{Name: "x", MaxAttempts: 1}), TrialSeed(7, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if floor != r.Metrics.Amplification || floor < 1.2 {
		t.Fatalf("floor %v, want the quiet run's %v (well above 1 at 10 calls/s)", floor, r.Metrics.Amplification)
	}
	found := false
	for _, n := range rep.Tables[0].Notes {
		found = found || strings.Contains(n, "noise floor")
	}
	if !found {
		t.Fatalf("notes %q lack the noise floor", rep.Tables[0].Notes)
	}
}

func TestTablesCarryTheGeneratedTitle(t *testing.T) {
	sc, _ := Lookup("metastable")
	rep, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Clients: 20, Duration: 25 * time.Second, Policies: []string{"no-retry"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Tables[0].Title, rep.Title+" (") || !strings.Contains(rep.Title, "187% load") {
		t.Fatalf("table title %q, report title %q", rep.Tables[0].Title, rep.Title)
	}
}

// aws-occ runs the published model: the n-th retry's ceiling is
// min(2s, 5ms·2^n), so 10ms for the first retry; decorrelated draws from
// [5ms, 3·prev] starting at prev = 5ms.
func TestAWSOCCFollowsThePublishedSchedule(t *testing.T) {
	src := rand.NewPCG(1, 2)
	none := occStrategy(PolicyExponential)(src)
	for n, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond, 8: 1280 * time.Millisecond, 9: 2 * time.Second, 20: 2 * time.Second} {
		if got := none.Delay(n, 0); got != want {
			t.Errorf("no jitter, retry %d: %v, want min(2s, 5ms·2^%d) = %v", n, got, n, want)
		}
	}
	full := occStrategy(PolicyFull)(src)
	var hi time.Duration
	for i := 0; i < 2000; i++ {
		hi = max(hi, full.Delay(1, 0))
	}
	if hi > 10*time.Millisecond || hi < 9*time.Millisecond {
		t.Errorf("full jitter, first retry: highest of 2000 draws %v, want just under the 10ms ceiling", hi)
	}
	dec := occStrategy(PolicyDecorrelated)(src)
	for i := 0; i < 2000; i++ {
		if d := dec.Delay(1, 0); d < 5*time.Millisecond || d > 15*time.Millisecond {
			t.Fatalf("decorrelated, first retry: %v outside [5ms, 15ms]", d)
		}
	}
}

func TestStdErr(t *testing.T) {
	if got := StdErr([]float64{1, 2, 3, 4}); math.Abs(got-0.6455) > 1e-3 {
		t.Fatalf("StdErr = %v, want sd 1.291/√4 = 0.6455", got)
	}
	if StdErr([]float64{5}) != 0 || StdErr(nil) != 0 {
		t.Fatal("StdErr of fewer than two values must be 0")
	}
}

// The retry-budget scenario's published models against their closed
// forms: the bucket earns 0.1 per first try, so once its 5 starting
// tokens are spent a failing server sees at most about 1.1 attempts per
// call (here 100 calls per client: (5 + 10) / 100 extra at most); the
// breaker stops retrying once a tenth of the attempts fail, and retries
// freely below that.
func TestRetryBudgetPublishedModels(t *testing.T) {
	fullModel(t)
	sc, _ := Lookup("retry-budget")
	rep, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Policies: []string{"immediate", "published-bucket", "published-breaker"}})
	if err != nil {
		t.Fatal(err)
	}
	probs := []float64{0.01, 0.10, 0.20, 0.50, 0.75}
	for i, c := range rep.Cases[:len(probs)] { // then the client sweep
		p := probs[i]
		imm, bucket, brk := c.Rows[0].Metrics, c.Rows[1].Metrics, c.Rows[2].Metrics
		want := 1 + p + p*p + p*p*p
		if math.Abs(imm.AttemptsPerCall-want) > 0.05*want {
			t.Errorf("%s immediate: %v attempts per call, want 1+p+p²+p³ = %.3f", c.Name, imm.AttemptsPerCall, want)
		}
		if bucket.AttemptsPerCall > 1.16 || bucket.AttemptsPerCall > imm.AttemptsPerCall+1e-9 {
			t.Errorf("%s published bucket: %v attempts per call, want at most 1 + 15/100 and no more than immediate", c.Name, bucket.AttemptsPerCall)
		}
		switch {
		case p <= 0.01 && math.Abs(brk.AttemptsPerCall-want) > 0.05*want:
			t.Errorf("%s published breaker below its 10%% threshold: %v, want immediate's %.3f", c.Name, brk.AttemptsPerCall, want)
		case p >= 0.5 && brk.AttemptsPerCall > 1.02:
			t.Errorf("%s published breaker above its threshold: %v attempts per call, want about 1", c.Name, brk.AttemptsPerCall)
		}
	}
}
