package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stormguard/stormguard/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runCLI runs the command with args and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, false)
	return code, out.String(), errOut.String()
}

func TestRunPrintsAlignedTables(t *testing.T) {
	fullModel(t)
	code, out, errOut := runCLI(t, "retry-budget", "aws-occ", "--trials", "10", "--clients", "20")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Retries against a failing server", "token-bucket", "AWS OCC contention: 20 clients, 10 trials", "no jitter", "Columns:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Every row of a table has the width of its rule.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "---") {
			rule := len(lines[i+1])
			for j := i + 2; j < len(lines) && lines[j] != "" && !strings.HasPrefix(lines[j], "each cell") && !strings.HasPrefix(lines[j], "* "); j++ {
				if n := len([]rune(lines[j])); n != rule {
					t.Errorf("row %q is %d wide, rule %d", lines[j], n, rule)
				}
			}
			if n := len([]rune(l)); n != rule {
				t.Errorf("header %q is %d wide, rule %d", l, n, rule)
			}
		}
	}
	if strings.Contains(errOut, "\r") {
		t.Error("progress bar drawn although stderr is not a terminal")
	}
}

func TestJSONIsByteIdenticalForTheSameSeed(t *testing.T) {
	args := []string{"--json", "--quiet", "--seed", "5", "gateway-restart", "--clients", "500", "--duration", "30s"}
	_, a, _ := runCLI(t, args...)
	_, b, _ := runCLI(t, append(args, "--workers", "1")...)
	if a == "" || a != b {
		t.Fatal("same seed, different JSON")
	}
	var reports []sim.Report
	if err := json.Unmarshal([]byte(a), &reports); err != nil || len(reports) != 1 || reports[0].Seed != 5 || reports[0].ModelVersion != sim.ModelVersion {
		t.Fatalf("JSON does not decode to one report with seed 5: %v", err)
	}
	if len(reports[0].Cases[0].Rows) != 6 || reports[0].Cases[0].Rows[0].Series == nil {
		t.Fatalf("rows %+v", reports[0].Cases[0].Rows)
	}
	_, c, _ := runCLI(t, "--json", "--quiet", "--seed", "6", "gateway-restart", "--clients", "500", "--duration", "30s")
	if c == a {
		t.Fatal("different seeds, same JSON")
	}
}

func TestScenarioFile(t *testing.T) {
	fullModel(t)
	code, out, errOut := runCLI(t, "--file", "testdata/example.yaml", "--duration", "40s", "--policies", "no-retry,careful")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "An API at 80% load") || !strings.Contains(out, "careful") || strings.Contains(out, "immediate") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestOutDirWritesSelfContainedReport(t *testing.T) {
	fullModel(t)
	dir := t.TempDir()
	args := []string{"--quiet", "--seed", "2", "retry-budget", "metastable", "--duration", "50s", "--policies", "immediate,full+budget"} // 20s after the blip: enough to call a policy stuck
	code, _, errOut := runCLI(t, append([]string{"--out", dir, "--png"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	// retry-budget: 2 sweep plots for each of its 2 sweeps; metastable: an
	// overview and 2 policies for each of its 3 cases.
	if n := strings.Count(html, "<svg"); n != 13 {
		t.Errorf("%d charts, want 13", n)
	}
	// Each section ends its tables with the verdict and the policies.
	if n := strings.Count(html, `<div class="verdict"><h3>Verdict</h3>`); n != 2 {
		t.Errorf("%d verdicts, want one per scenario", n)
	}
	if !strings.Contains(html, "<dt>full&#43;budget</dt><dd>full jitter as above, plus a retry budget") || !strings.Contains(html, "stuck after the fault") {
		t.Error("the report lacks the policy legend or the metastable verdict")
	}
	for _, bad := range []string{"<script", "<link", "@import", "src=\"http", "href=\"http", "url(http"} {
		if strings.Contains(html, bad) {
			t.Errorf("report refers to something outside itself: %q", bad)
		}
	}
	for _, name := range []string{"retry-budget-01.svg", "retry-budget-02.png", "metastable-03.svg", "metastable-03.png"} {
		if info, err := os.Stat(filepath.Join(dir, "charts", name)); err != nil || info.Size() < 1000 {
			t.Errorf("chart file %s: %v", name, err)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, stdout, _ := runCLI(t, append([]string{"--json"}, args...)...)
	if string(js) != stdout {
		t.Error("report.json differs from --json output")
	}
}

func TestPoliciesAcrossScenarios(t *testing.T) {
	fullModel(t)
	// Each scenario runs the names it knows; the default suite leaves out
	// the scenarios that know none of them.
	lists, skipped, err := resolvePolicies("token-bucket,full+budget", sim.Scenarios(), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range sim.Scenarios() {
		want := "full+budget"
		switch sc.Name {
		case "retry-budget":
			want = "token-bucket,full+budget"
		case "aws-occ":
			want = ""
		}
		if got := strings.Join(lists[i], ","); got != want {
			t.Errorf("%s runs %q, want %q", sc.Name, got, want)
		}
	}
	if strings.Join(skipped, ",") != "aws-occ" {
		t.Errorf("skipped %v, want aws-occ", skipped)
	}
	if _, _, err := resolvePolicies("token-bucket", sim.Scenarios()[:1], true); err == nil {
		t.Error("a named scenario that knows none of the policies was accepted")
	}
	if _, _, err := resolvePolicies("no-such-policy", sim.Scenarios(), false); err == nil {
		t.Error("a policy no scenario knows was accepted")
	}
	code, out, errOut := runCLI(t, "--policies", "token-bucket", "--quiet")
	if code != exitOK || !strings.Contains(errOut, "skipping aws-occ") || !strings.Contains(out, "token-bucket") || strings.Contains(out, "AWS OCC") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestListAndUsage(t *testing.T) {
	code, out, _ := runCLI(t, "list")
	if code != exitOK {
		t.Fatalf("list exit %d", code)
	}
	for _, sc := range sim.Scenarios() {
		if !strings.Contains(out, sc.Name) || !strings.Contains(out, sc.Title) {
			t.Errorf("list lacks %s", sc.Name)
		}
	}
	for _, args := range [][]string{
		{"nope"}, {"--trials", "-1"}, {"--duration", "forever"}, {"--seed", "x"}, {"--bogus"},
		{"list", "aws-occ"}, {"aws-occ", "--policies", "full+budget"}, {"--file", "testdata/missing.yaml"},
		{"retry-budget", "--policies", "fulll"},
	} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, code, errOut, exitUsage)
		}
	}
	if code, _, errOut := runCLI(t, "-h"); code != exitOK || !strings.Contains(errOut, "Usage: stormsim") {
		t.Errorf("-h: exit %d, %q", code, errOut)
	}
}

func TestCancelledRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"aws-occ"}, &out, &errOut, false); code != exitError || !strings.Contains(errOut.String(), "canceled") {
		t.Fatalf("exit %d, %q", code, errOut.String())
	}
}

func TestParseArgsInterleaved(t *testing.T) {
	var errOut bytes.Buffer
	c, err := parseArgs([]string{"aws-occ", "--trials", "5", "metastable", "--seed=3", "--duration", "90", "--policies", "all"}, &errOut)
	if err != nil {
		t.Fatal(err, errOut.String())
	}
	if strings.Join(c.scenarios, ",") != "aws-occ,metastable" || c.trials != 5 || c.seed != 3 || c.duration != 90*time.Second || c.policies != "all" {
		t.Fatalf("%+v", c)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&buf, true, "x")
	p.now = func() time.Time { return now }
	p.start = now
	p.update(1, 10)
	if buf.Len() != 0 {
		t.Fatalf("bar drawn before a second passed: %q", buf.String())
	}
	now = now.Add(1500 * time.Millisecond)
	p.update(5, 10)
	if !strings.Contains(buf.String(), "\rx") || !strings.Contains(buf.String(), " 50%") {
		t.Fatalf("bar %q", buf.String())
	}
	p.finish()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Fatalf("bar not erased: %q", buf.String())
	}
	var off bytes.Buffer
	q := newProgress(&off, false, "y")
	q.now = func() time.Time { return now.Add(time.Hour) }
	q.update(1, 2)
	q.finish()
	if off.Len() != 0 {
		t.Fatalf("disabled bar wrote %q", off.String())
	}
}

// The review's stalling model: a custom policy bounded only by
// max_elapsed that retries at once (max_attempts -1, a constant backoff
// of 0: max_elapsed alone now means retry.Policy's 3 attempts and its
// default backoff), a tier with no latency and a 503 window. The run must
// end, with an error naming the cause.
func TestStallingScenarioFileEndsWithItsCause(t *testing.T) {
	fullModel(t)
	path := filepath.Join(t.TempDir(), "stall.yaml")
	spec := `name: stall
clients: 1
arrival: {every: 1s}
duration: 5s
tiers: [{name: api}]
faults: [{kind: unavailable, tier: api, start: 1s, end: 3s}]
policies: [tight]
custom: [{name: tight, max_attempts: -1, max_elapsed: 10s, backoff: {strategy: constant}}]
`
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "--file", path, "--quiet")
	if code == exitOK || !strings.Contains(errOut, "makes no progress") || !strings.Contains(errOut, "backoff") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the stall and its cure", code, errOut)
	}
}

// cancelOn is a stderr that cancels a run when a line containing marker
// is written to it.
type cancelOn struct {
	bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.marker) {
		c.cancel()
	}
	return c.Buffer.Write(p)
}

// A cancelled run with --json or --out wrote nothing, not even the
// scenarios that had finished: now it writes them and the cancelled one's
// partial report, in every format, and still exits 1.
func TestCancelledRunWritesThePartialReport(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	var out bytes.Buffer
	errOut := &cancelOn{marker: "retry-budget: ", cancel: cancel}
	// Cancelled as soon as the first scenario has been reported (its
	// timing line), before the second starts: with --workers set the
	// next scenario starts only when the report loop asks for it (with 0
	// the second runs beside the first).
	code := run(ctx, []string{"retry-budget", "metastable", "--trials", "1", "--clients", "20", "--duration", "30s", "--workers", "2", "--json", "--out", dir}, &out, errOut, false)
	if code != exitError {
		t.Fatalf("exit %d, want %d: %s", code, exitError, errOut.String())
	}
	var reports []sim.Report
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil {
		t.Fatalf("--json wrote no report: %v\n%.300s\nstderr: %s", err, out.String(), errOut.String())
	}
	if len(reports) != 2 || reports[0].Scenario != "retry-budget" || reports[0].Partial ||
		reports[1].Scenario != "metastable" || !reports[1].Partial || reports[1].TrialsDone != 0 {
		t.Fatalf("reports: %d, want retry-budget whole and metastable partial with no trial: %+v", len(reports), reports)
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil || !bytes.Equal(js, out.Bytes()) {
		t.Errorf("report.json: %v (equal to --json: %v)", err, bytes.Equal(js, out.Bytes()))
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(page), "partial") || !strings.Contains(string(page), "Metastable") {
		t.Errorf("report.html: %v, want both scenarios, the second marked partial", err)
	}
}

// The scenarios of a run go two at a time when --workers is 0 (issue #36:
// the default suite's cores idled at the end of each scenario); what is
// printed, tables or JSON, is the same bytes as one after another, in the
// same order.
func TestScenariosAtOnceSameOutput(t *testing.T) {
	base := []string{"retry-budget", "brownout", "--trials", "1", "--clients", "3", "--duration", "40s", "--quiet"}
	for _, format := range [][]string{nil, {"--json"}} {
		args := append(append([]string{}, base...), format...)
		codeA, outA, errA := runCLI(t, args...)
		codeB, outB, errB := runCLI(t, append(args, "--workers", "2")...)
		if codeA != exitOK || codeB != exitOK {
			t.Fatalf("%v: exit %d and %d: %s %s", format, codeA, codeB, errA, errB)
		}
		if outA != outB || outA == "" {
			t.Errorf("%v: at once and one after another differ (%d and %d bytes)", format, len(outA), len(outB))
		}
	}
}

// A panic in a scenario's run (a policy's breaker or budget, say), which
// now runs in a goroutine of its own, goes on in the goroutine that waits
// for its report, once the runs beside it have ended (goleak checks).
func TestScenarioRunPanicGoesOnInTheCaller(t *testing.T) {
	scs := []*sim.Scenario{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	lists := [][]string{nil, nil, nil}
	var cancelled atomic.Bool
	run := func(sc *sim.Scenario, ctx context.Context, o sim.Options) (*sim.Report, error) {
		switch sc.Name {
		case "b":
			panic("boom in b")
		case "c": // runs beside b until b's panic stops it
			<-ctx.Done()
			cancelled.Store(true)
			return nil, ctx.Err()
		}
		return &sim.Report{Scenario: sc.Name}, nil
	}
	a := startAhead(context.Background(), &config{}, scs, lists, io.Discard, false, run)
	defer a.stop()
	if out, ok := a.wait(0); !ok || out.err != nil || out.rep.Scenario != "a" {
		t.Fatalf("a: %+v %v", out, ok)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom in b" {
				t.Errorf("recovered %v, want b's panic", r)
			}
		}()
		a.wait(1)
		t.Error("wait(1) returned")
	}()
	if !cancelled.Load() {
		t.Error("c was still running when b's panic went on")
	}
}

// With --workers set the scenarios run one after another as the report
// loop sees them: a scenario starts only when the loop asks for it, after
// the one before was reported; and once stop is called no more start.
func TestOneByOneStartsWhenAsked(t *testing.T) {
	scs := []*sim.Scenario{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	lists := [][]string{nil, nil, nil}
	var started sync.Map
	run := func(sc *sim.Scenario, ctx context.Context, o sim.Options) (*sim.Report, error) {
		started.Store(sc.Name, true)
		return &sim.Report{Scenario: sc.Name}, nil
	}
	a := startAhead(context.Background(), &config{workers: 1}, scs, lists, io.Discard, false, run)
	if out, ok := a.wait(0); !ok || out.rep.Scenario != "a" {
		t.Fatalf("a: %+v %v", out, ok)
	}
	if _, ok := started.Load("b"); ok {
		t.Error("b started before the report loop asked for it")
	}
	if out, ok := a.wait(1); !ok || out.rep.Scenario != "b" {
		t.Fatalf("b: %+v %v", out, ok)
	}
	a.stop()
	if _, ok := started.Load("c"); ok {
		t.Error("c started though the loop stopped after b")
	}
}

// A run that calls runtime.Goexit (a test's FailNow, say) does not leave
// the report loop waiting for good: its wait goes on as a panic.
func TestRunGoexitDoesNotHangTheReportLoop(t *testing.T) {
	scs := []*sim.Scenario{{Name: "a"}}
	run := func(*sim.Scenario, context.Context, sim.Options) (*sim.Report, error) {
		runtime.Goexit()
		return nil, nil
	}
	for _, workers := range []int{0, 1} {
		a := startAhead(context.Background(), &config{workers: workers}, scs, [][]string{nil}, io.Discard, false, run)
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			a.wait(0)
		}()
		select {
		case r := <-done:
			if r == nil {
				t.Errorf("workers %d: wait returned after a run's Goexit, want its panic", workers)
			}
		case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
			t.Fatalf("workers %d: wait(0) blocked after the run called runtime.Goexit", workers)
		}
		a.stop()
	}
}
