package promretry_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/throttle"
)

// countingThrottle is an SRE-like limiter whose counts the test sets.
type countingThrottle struct {
	plain
	mu  sync.Mutex
	rej uint64
}

func (l *countingThrottle) Stats() throttle.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return throttle.Stats{Probability: 0.5, Rejected: l.rej}
}

func (l *countingThrottle) set(n uint64) {
	l.mu.Lock()
	l.rej = n
	l.mu.Unlock()
}

// family returns the series of metric name, as label set → value.
func family(t *testing.T, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[strings.Join(kv, ",")] = v
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// TestSharedLimiterExportedOnce is the regression test of issue 32 item 7
// (limiters): a limiter that two operations share (one policy, as config
// watches it under each operation) is exported once, under a label of its
// own, and stormguard_limiter_info joins each operation to it; the
// README's shed-share query then stays within [0, 1] for the low-traffic
// operation. An operation with a limiter of its own keeps its label.
func TestSharedLimiterExportedOnce(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	shared := &countingThrottle{}
	own := &countingThrottle{}
	defer c.WatchLimiter("search", shared)()
	defer c.WatchLimiter("checkout", shared)()
	defer c.WatchLimiter("login", own)()
	shared.set(30)
	own.set(4)
	rej := family(t, reg, "stormguard_throttle_local_rejections_total")
	want := map[string]float64{"operation=_shared:checkout,search": 30, "operation=login": 4}
	if !equal(rej, want) {
		t.Errorf("local_rejections_total %v, want %v (the shared limiter once)", rej, want)
	}
	prob := family(t, reg, "stormguard_throttle_rejection_probability")
	if len(prob) != 2 || prob["operation=_shared:checkout,search"] != 0.5 {
		t.Errorf("rejection_probability %v, want the shared limiter once and login's", prob)
	}
	info := family(t, reg, "stormguard_limiter_info")
	wantInfo := map[string]float64{
		"limiter=_shared:checkout,search,operation=checkout": 1,
		"limiter=_shared:checkout,search,operation=search":   1,
		"limiter=login,operation=login":                      1,
	}
	if !equal(info, wantInfo) {
		t.Errorf("limiter_info %v, want %v", info, wantInfo)
	}
	lint(t, reg)
}

// TestSharedBreakerTransitionsOnce: a breaker two operations share counts
// each transition once, under its own label (stormguard_breaker_info joins
// the operations to it), while each operation's breaker_state shows the
// state of the breaker it uses.
func TestSharedBreakerTransitionsOnce(t *testing.T) {
	clk := clocktest.NewFake()
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: clk})
	defer c.WatchBreaker("search", b)()
	defer c.WatchBreaker("checkout", b)()
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errTransient) // closed → open
	tr := family(t, reg, "stormguard_breaker_transitions_total")
	if got := sum(tr); got != 1 {
		t.Errorf("breaker_transitions_total %v: sum %v, want one transition counted once", tr, got)
	}
	if v := tr["from=closed,operation=_shared:checkout,search,to=open"]; v != 1 {
		t.Errorf("breaker_transitions_total %v, want closed→open under _shared:checkout,search", tr)
	}
	for _, op := range []string{"search", "checkout"} {
		if v := value(t, reg, "stormguard_breaker_state", "operation", op, "state", "open"); v != 1 {
			t.Errorf("breaker_state{operation=%s,state=open} = %v, want 1", op, v)
		}
	}
	info := family(t, reg, "stormguard_breaker_info")
	if len(info) != 2 || info["breaker=_shared:checkout,search,operation=search"] != 1 {
		t.Errorf("breaker_info %v, want search and checkout joined to the shared breaker", info)
	}
	lint(t, reg)
}

// TestOverflowLimitersFoldedIn: limiters of operations past
// MaxOperations share the _other label; each one's counts are in its
// counter, live, not just those of the last one watched.
func TestOverflowLimitersFoldedIn(t *testing.T) {
	c := promretry.New(promretry.Config{MaxOperations: 1})
	reg := registry(t, c)
	first, second := &countingThrottle{}, &countingThrottle{}
	c.WatchLimiter("kept", &countingThrottle{})
	defer c.WatchLimiter("past-1", first)()
	first.set(5)
	defer c.WatchLimiter("past-2", second)()
	second.set(7)
	first.set(10) // the first goes on counting
	if got := value(t, reg, "stormguard_throttle_local_rejections_total", "operation", promretry.OverflowOperation); got != 17 {
		t.Errorf("local_rejections_total{operation=_other} = %v, want 17 (10 + 7)", got)
	}
	lint(t, reg)
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// lint runs client_golang's linter and, when installed, promtool check
// metrics over a scrape of reg.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestReadmeThrottleShareQuery evaluates the README's throttler-share
// query with promtool over series as the Collector exports them: a
// throttler shared by a busy and a quiet operation, and one of its own.
// The shared one's share is its rejections over the attempts of both
// operations (within [0, 1]); the own one's is unchanged.
func TestReadmeThrottleShareQuery(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed; CI=true requires it")
		}
		t.Skip("promtool not installed")
	}
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "# share of attempts each client-side throttler sheds"
	_, rest, ok := strings.Cut(string(data), head)
	if !ok {
		t.Fatalf("README.md has no %q query", head)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	query, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the query's code block does not end")
	}
	var expr strings.Builder
	for line := range strings.Lines(strings.TrimSpace(query)) {
		expr.WriteString("          " + line)
	}
	const shared = `_shared:checkout,search`
	tests := `rule_files: []
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'stormguard_attempts_total{operation="checkout",attempt_kind="first",outcome="success"}'
        values: '0+90x10'
      - series: 'stormguard_attempts_total{operation="search",attempt_kind="first",outcome="success"}'
        values: '0+1x10'
      - series: 'stormguard_attempts_total{operation="login",attempt_kind="first",outcome="success"}'
        values: '0+6x10'
      - series: 'stormguard_throttle_local_rejections_total{operation="` + shared + `"}'
        values: '0+10x10'
      - series: 'stormguard_throttle_local_rejections_total{operation="login"}'
        values: '0+6x10'
      - series: 'stormguard_limiter_info{operation="checkout",limiter="` + shared + `"}'
        values: '1x10'
      - series: 'stormguard_limiter_info{operation="search",limiter="` + shared + `"}'
        values: '1x10'
      - series: 'stormguard_limiter_info{operation="login",limiter="login"}'
        values: '1x10'
    promql_expr_test:
      - eval_time: 10m
        expr: |
` + expr.String() + `
        exp_samples:
          - labels: '{limiter="` + shared + `"}'
            value: ` + strconv.FormatFloat(10.0/101, 'g', -1, 64) + `
          - labels: '{limiter="login"}'
            value: 0.5
`
	path := filepath.Join(t.TempDir(), "share_test.yaml")
	if err := os.WriteFile(path, []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n%s", err, out, tests)
	}
}
