package simtest_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// The acceptance case: at 50% failures a policy without a budget makes
// almost two attempts per call and fails an amplification gate of 1.5×;
// the same retries through a budget shared by the process's calls keep
// the load near the baseline and pass.
func TestAmplificationGateNoBudgetFailsBudgetPasses(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("no budget: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, simtest.ExitFail, out, errs)
	}
	re := regexp.MustCompile(`: FAIL nobudget failed errors-50: peak amplification (\d+\.\d+)× is above the limit 1\.50× by (\d+\.\d+)× \(\+(\d+)%; mean of 3 trials`)
	m := re.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("stderr does not name policy, storm and margin:\n%s", errs)
	}
	peak, _ := strconv.ParseFloat(m[1], 64)
	by, _ := strconv.ParseFloat(m[2], 64)
	if peak < 1.7 || peak > 2.1 {
		t.Errorf("peak amplification %.2f, want about 1.9 (1 + 0.5 + 0.25 + 0.125 attempts per call)", peak)
	}
	if d := peak - 1.5 - by; d > 0.006 || d < -0.006 {
		t.Errorf("margin %.2f does not match peak %.2f - limit 1.5", by, peak)
	}
	mustContain(t, "stdout", out, "FAIL max-amplification", "FAIL nobudget", "weakest point: the 50% failures: with no budget, retries multiply the attempts; 1.7")
	mustContain(t, "stderr", errs, ": FAIL: 1 gate(s) failed, in 1 of 1 policies")

	code, out, errs = run(t, "--storms", "errors-50", "--max-amplification", "1.5", "testdata/budgeted.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("shared budget: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "PASS budgeted")
	mustNotContain(t, "stderr", errs, "FAIL")
}

// Without a budget, a brownout tips the downstream into a metastable
// overload that outlasts the trigger: the recovery gate fails with "no
// recovery"; the budgeted policy recovers within the limit, and a limit
// shorter than its recovery fails it by the margin.
func TestRecoveryGate(t *testing.T) {
	fullModel(t)
	code, _, errs := run(t, "--storms", "brownout", "--max-recovery", "10s", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("no budget: exit %d, want 1\n%s", code, errs)
	}
	mustContain(t, "stderr", errs, ": FAIL nobudget failed brownout: no recovery in the 20s observed after the trigger ended, in any of 3 trials (limit 10s)")

	code, out, errs := run(t, "--storms", "brownout", "--max-recovery", "10s", "--json", "testdata/budgeted.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("budget: exit %d, want 0\n%s", code, errs)
	}
	var rep simtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.Policies[0].Storms[0]
	if !r.Recovered || r.RecoveryS == nil || r.RecoveryS.Mean <= 1 || r.RecoveryS.Mean >= 10 {
		t.Fatalf("budgeted brownout: recovered %v in %+v, want a recovery between 1s and 10s", r.Recovered, r.RecoveryS)
	}

	code, _, errs = run(t, "--storms", "brownout", "--max-recovery", "1s", "testdata/budgeted.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("budget, 1s limit: exit %d, want 1\n%s", code, errs)
	}
	re := regexp.MustCompile(`: FAIL budgeted failed brownout: recovery took (\S+) after the trigger ended, (\S+) over the limit 1s`)
	if re.FindStringSubmatch(errs) == nil {
		t.Fatalf("stderr lacks the recovery margin:\n%s", errs)
	}

	// none turns the gate off: the stuck policy then passes.
	code, out, errs = run(t, "--storms", "brownout", "--max-recovery", "none", "--max-amplification", "none", "testdata/nobudget.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("--max-recovery none: exit %d, want 0\n%s", code, errs)
	}
	mustContain(t, "stdout", out, "stuck", "recovery not gated")
}

// With no gates given, recovery within DefaultMaxRecovery is still
// required: a check without flags can fail.
func TestDefaultRecoveryGate(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--storms", "latency-spike", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "gates: peak amplification ≤ 2×, recovery within 10s", "stuck")
	mustContain(t, "stderr", errs, "nobudget failed latency-spike: no recovery")
}

// A policy that never retries passes on load but fails a success gate at
// 50% failures; retries mask the failures and pass it.
func TestSuccessGate(t *testing.T) {
	fullModel(t)
	code, _, errs := run(t, "--storms", "errors-50", "--min-success", "95%", "testdata/noretry.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("no retries: exit %d, want 1\n%s", code, errs)
	}
	re := regexp.MustCompile(`: FAIL noretry failed errors-50: success while the trigger lasts (\d+\.\d)% is below the minimum 95\.0% by (\d+\.\d) points`)
	m := re.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("stderr lacks the success margin:\n%s", errs)
	}
	if rate, _ := strconv.ParseFloat(m[1], 64); rate < 45 || rate > 55 {
		t.Errorf("success %.1f%%, want about 50%% (half the calls ending in the storm fail: not diluted by the 30s of steady traffic)", rate)
	}
	code, _, errs = run(t, "--storms", "errors-50", "--min-success", "0.9", "--max-amplification", "2.5", "testdata/nobudget.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("retries: exit %d, want 0\n%s", code, errs)
	}
}

// Gates and the downstream in the policy file itself: the top-level gate
// fails the policy without a budget at 50% failures, the outage's own
// looser gate lets its outage pass, and the budgeted policy passes both.
// --operation picks policies through the file's operations.
func TestGatesInFile(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--storms", "errors-50,outage", "testdata/infile.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "40 workers × service exp(20ms)", "fleet of 20 clients at 1000 calls/s",
		"peak amplification ≤ 1.5×", "outage: peak ≤ 5×", "PASS budgeted", "FAIL nobudget")
	mustContain(t, "stderr", errs, ": FAIL nobudget failed errors-50: peak amplification",
		"holds downstream or gates sections, which the service's loader (config) refuses")
	mustNotContain(t, "stderr", errs, "failed outage", "budgeted failed")

	code, out, errs = run(t, "--storms", "errors-50", "--operation", "charge-card", "testdata/infile.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("--operation charge-card: exit %d, want 0\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "charge-card (budgeted)")
	mustNotContain(t, "stdout", out, "nobudget")

	// A flag replaces the file's top-level gate.
	code, _, errs = run(t, "--storms", "errors-50", "--max-amplification", "3", "testdata/infile.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("--max-amplification 3: exit %d, want 0\n%s", code, errs)
	}
}

// The downstream and gates from a file of their own (--downstream), and
// downstream flags over them.
func TestDownstreamFileAndFlags(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--storms", "errors-10", "--downstream", "testdata/downstream.yaml", "--json", "testdata/budgeted.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var rep simtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	d := rep.Downstream
	if d.Workers != 24 || d.Queue != 600 || d.Rate != 200 || d.Clients != 10 || d.Service != "uniform(60ms,100ms)" || d.Timeout != "1s" || d.Latency != "1ms" {
		t.Errorf("downstream from the file: %+v", d)
	}
	if g := rep.Gates; g.MaxAmplification == nil || *g.MaxAmplification != 2 || g.Storms["errors-10"].MinSuccess == nil || *g.Storms["errors-10"].MinSuccess != 0.85 || g.MaxRecoveryS == nil || *g.MaxRecoveryS != 10 {
		t.Errorf("gates from the file: %+v", rep.Gates)
	}
	mustNotContain(t, "stderr", errs, "refuses")

	code, out, errs = run(t, "--storms", "errors-10", "--downstream", "testdata/downstream.yaml", "--json",
		"--workers", "30", "--rate", "150", "--clients", "5", "--queue", "100", "--timeout", "500ms", "--latency", "2ms", "--service", "exp(50ms)",
		"testdata/budgeted.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	rep = simtest.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	d = rep.Downstream
	if d.Workers != 30 || d.Queue != 100 || d.Rate != 150 || d.Clients != 5 || d.Service != "exp(50ms)" || d.Timeout != "500ms" || d.Latency != "2ms" || d.Capacity != 600 {
		t.Errorf("downstream with flags: %+v", d)
	}

	// --capacity sizes the workers from the mean service time.
	code, out, errs = run(t, "--storms", "errors-10", "--capacity", "500", "--service", "40ms", "--json", "testdata/budgeted.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	rep = simtest.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Downstream.Workers != 20 || rep.Downstream.Rate != 300 || rep.Downstream.Queue != 1000 {
		t.Errorf("capacity 500/s at 40ms: %+v, want 20 workers, 300 calls/s (60%%), queue 1000 (2s of work)", rep.Downstream)
	}
}

// Retries in a tight loop without a count limit: the run is stopped for
// its work and the policy fails those storms as a runaway (exit 1, not a
// bad-input 2), whatever the gates.
func TestRunaway(t *testing.T) {
	fullModel(t)
	path := writeFile(t, "tight.yaml", "policies:\n  tight:\n    max_attempts: unlimited\n    backoff: {strategy: constant, base: 0s}\n")
	code, out, errs := run(t, "--storms", "outage", "--max-recovery", "none", "--clients", "2", "--rate", "100", "--workers", "5", path)
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "runaway", "runaway retries: in the short outage")
	mustContain(t, "stderr", errs, ": FAIL tight failed outage: its retries ran away")
}

// With no gates given, a storm may not multiply the load more than
// tenfold either: twenty immediate attempts per call fail the outage;
// none turns the gate off.
func TestDefaultAmplificationGate(t *testing.T) {
	fullModel(t)
	path := writeFile(t, "hammer.yaml", "policies:\n  hammer:\n    max_attempts: 20\n    backoff: {strategy: constant, base: 0s}\n")
	code, out, errs := run(t, "--storms", "outage", "--max-recovery", "none", path)
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stderr", errs, ": FAIL hammer failed outage: peak amplification ", "× is above the limit 2.00× by ")
	code, out, errs = run(t, "--storms", "outage", "--max-recovery", "none", "--max-amplification", "none", path)
	if code != simtest.ExitPass {
		t.Fatalf("--max-amplification none: exit %d, want 0\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "amplification not gated, recovery not gated")
}

// The README's example policy against the README's CI downstream: its
// time-window breaker keeps the default 60s open period, so breakers that
// trip in the outage keep failing calls long after the downstream is
// back; the weakest point says so, and open_timeout: 5s passes.
func TestReadmeExampleBreakerFinding(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--storms", "outage", "--downstream", "testdata/downstream.yaml", "testdata/policies.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "stuck", "weakest point: the short outage: after the trigger, open breakers failed at least")
	mustContain(t, "stderr", errs, ": FAIL payments ", "did not recover")

	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.Replace(string(data), "failure_ratio: 0.3}", "failure_ratio: 0.3, open_timeout: 5s}", 1)
	if fixed == string(data) {
		t.Fatal("the example's breaker line changed")
	}
	code, out, errs = run(t, "--storms", "outage", "--trials", "8", "--downstream", "testdata/downstream.yaml", writeFile(t, "policies.yaml", fixed))
	if code != simtest.ExitPass {
		t.Fatalf("open_timeout 5s: exit %d, want 0\n%s\n%s", code, out, errs)
	}
}
