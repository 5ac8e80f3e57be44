package promretry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// retryRatioExpr is the retry ratio as DESIGN.md and the README give it.
const retryRatioExpr = `sum(rate(stormguard_attempts_total{attempt_kind="retry"}[1m])) / sum(rate(stormguard_attempts_total{attempt_kind="first"}[1m]))`

// scrape is one scrape of a /metrics endpoint: its samples and the fake
// time it was taken at.
type scrape struct {
	at      time.Time
	samples model.Vector
}

func scrapeURL(t *testing.T, url string, at time.Time) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	s := scrape{at: at}
	for _, f := range fams {
		v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.TimeFromUnixNano(at.UnixNano())}, f)
		if err != nil {
			t.Fatal(err)
		}
		s.samples = append(s.samples, v...)
	}
	return s
}

// ratioRE reads the retry ratio expression: sum(rate(sel[range])) / sum(rate(sel[range])),
// each selector one metric with one equality matcher.
var ratioRE = regexp.MustCompile(`^sum\(rate\(([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-z_]+)="([^"]*)"\}\[(\w+)\]\)\)\s*/\s*sum\(rate\(([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-z_]+)="([^"]*)"\}\[(\w+)\]\)\)$`)

// evalRatio evaluates the retry ratio expression at the time of s2, by
// hand: rate() of a series is its increase from s1 to s2 divided by the
// time between them (s1 must lie exactly one range before s2, as Prometheus
// would see two samples at the range's edges; a counter reset counts from
// zero), and sum() adds the rates of every series the selector matches.
func evalRatio(t *testing.T, expr string, s1, s2 scrape) float64 {
	t.Helper()
	m := ratioRE.FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("cannot evaluate %q", expr)
	}
	sumRate := func(metric, label, value, rng string) float64 {
		d, err := model.ParseDuration(rng)
		if err != nil {
			t.Fatal(err)
		}
		if got := s2.at.Sub(s1.at); got != time.Duration(d) {
			t.Fatalf("scrapes %v apart, the expression's range is %v", got, d)
		}
		before := map[model.Fingerprint]float64{}
		for _, s := range s1.samples {
			before[s.Metric.Fingerprint()] = float64(s.Value)
		}
		total := 0.0
		for _, s := range s2.samples {
			if string(s.Metric[model.MetricNameLabel]) != metric || string(s.Metric[model.LabelName(label)]) != value {
				continue
			}
			v := float64(s.Value)
			inc := v - before[s.Metric.Fingerprint()]
			if inc < 0 { // counter reset
				inc = v
			}
			total += inc / time.Duration(d).Seconds()
		}
		return total
	}
	return sumRate(m[1], m[2], m[3], m[4]) / sumRate(m[5], m[6], m[7], m[8])
}

// downstream is a scripted dependency: fail decides, per call and attempt
// (both from 0), whether the attempt fails. It counts the attempts it sees.
type downstream struct {
	clk           *clocktest.Fake
	fail          func(call, attempt int) bool
	first, retrys int
}

func (d *downstream) call(ctx context.Context, p *retry.Policy, n int) error {
	attempt := 0
	_, err := retry.Do(ctx, p, func(context.Context) (int, error) {
		if attempt == 0 {
			d.first++
		} else {
			d.retrys++
		}
		a := attempt
		attempt++
		d.clk.Advance(100 * time.Millisecond)
		if d.fail(n, a) {
			return 0, errTransient
		}
		return a, nil
	})
	return err
}

// TestScrapeEndToEnd is the acceptance test: calls with failures, a retry
// budget and a circuit breaker are observed by a Collector, scraped over
// HTTP from promhttp, checked with testutil, and the retry ratio
// expression of DESIGN.md, evaluated on the scraped samples, equals the
// true ratio of retries to first attempts.
func TestScrapeEndToEnd(t *testing.T) {
	const op = "inventory.get"
	clk := clocktest.NewFake()
	bud := budget.NewRatio(budget.RatioConfig{MaxTokens: 4, Refill: 0.5})
	brk := breaker.New(breaker.Config{ConsecutiveFailures: 8, OpenTimeout: 10 * time.Second, OpenJitter: -1, Clock: clk})
	defer brk.Close()

	c := promretry.New(promretry.Config{Operations: []string{op}})
	defer c.WatchBudget(op, bud)()
	defer c.WatchBreaker(op, brk)()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	url := srv.URL + "/metrics"

	p := &retry.Policy{
		Operation:   op,
		MaxAttempts: 3,
		Backoff:     backoff.Constant{},
		Budget:      bud,
		Breaker:     brk,
		Clock:       clk,
		Observer:    c,
	}
	ctx := context.Background()
	reasons := map[string]int{}
	count := func(err error) {
		switch {
		case err == nil:
			reasons["success"]++
		case errors.Is(err, retry.ErrBudgetExhausted):
			reasons["budget"]++
		case errors.Is(err, breaker.ErrOpen):
			reasons["breaker"]++
		case errors.Is(err, retry.ErrAttemptsExhausted):
			reasons["attempts"]++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}

	// Phase 1, one minute of light failure: the first attempt of every
	// fourth call fails, call 10 fails twice.
	s1 := scrapeURL(t, url, clk.Now())
	start := clk.Now()
	d := &downstream{clk: clk, fail: func(call, attempt int) bool {
		return attempt == 0 && call%4 == 0 || call == 10 && attempt < 2
	}}
	for i := range 20 {
		count(d.call(ctx, p, i))
	}
	clk.Set(start.Add(time.Minute))
	s2 := scrapeURL(t, url, clk.Now())
	trueRatio := float64(d.retrys) / float64(d.first)
	if d.first != 20 || d.retrys != 7 {
		t.Fatalf("phase 1 made %d first attempts and %d retries, want 20 and 7", d.first, d.retrys)
	}
	if got := evalRatio(t, retryRatioExpr, s1, s2); math.Abs(got-trueRatio) > 1e-12 {
		t.Errorf("retry ratio from the scrapes = %v, true ratio = %v", got, trueRatio)
	}

	// Phase 2, an outage: every attempt fails. The budget runs dry, then
	// the breaker opens after 8 consecutive failures.
	d.fail = func(int, int) bool { return true }
	for i := range 10 {
		count(d.call(ctx, p, i))
	}
	if reasons["budget"] == 0 || reasons["breaker"] == 0 || reasons["attempts"] == 0 {
		t.Fatalf("outage did not exhaust the budget and open the breaker: %v", reasons)
	}
	expected := fmt.Sprintf(`
# HELP stormguard_breaker_state Circuit breaker state, read at scrape time, as a StateSet: 1 for the current state (closed, half-open or open), 0 for the others.
# TYPE stormguard_breaker_state gauge
stormguard_breaker_state{operation="inventory.get",state="closed"} 0
stormguard_breaker_state{operation="inventory.get",state="half-open"} 0
stormguard_breaker_state{operation="inventory.get",state="open"} 1
# HELP stormguard_retry_budget_tokens Retries the retry budget would grant now (tokens), read at scrape time.
# TYPE stormguard_retry_budget_tokens gauge
stormguard_retry_budget_tokens{operation="inventory.get"} %v
# HELP stormguard_retry_budget_exhausted_total Calls that stopped because the retry budget refused a retry.
# TYPE stormguard_retry_budget_exhausted_total counter
stormguard_retry_budget_exhausted_total{operation="inventory.get"} %d
# HELP stormguard_retries_active Calls whose first attempt ended and that have not returned: waiting for a retry, running one, deciding to give up, or (hedged) waiting for cancelled copies.
# TYPE stormguard_retries_active gauge
stormguard_retries_active{operation="inventory.get"} 0
`, bud.Available(), reasons["budget"])
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(expected),
		"stormguard_breaker_state", "stormguard_retry_budget_tokens",
		"stormguard_retry_budget_exhausted_total", "stormguard_retries_active"); err != nil {
		t.Error(err)
	}

	// Phase 3, recovery: after the open period one probe call succeeds
	// and closes the breaker.
	clk.Advance(10 * time.Second)
	d.fail = func(int, int) bool { return false }
	count(d.call(ctx, p, 0))
	if st := brk.State(); st != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe", st)
	}

	calls := 0
	for _, n := range reasons {
		calls += n
	}
	expected = fmt.Sprintf(`
# HELP stormguard_breaker_state Circuit breaker state, read at scrape time, as a StateSet: 1 for the current state (closed, half-open or open), 0 for the others.
# TYPE stormguard_breaker_state gauge
stormguard_breaker_state{operation="inventory.get",state="closed"} 1
stormguard_breaker_state{operation="inventory.get",state="half-open"} 0
stormguard_breaker_state{operation="inventory.get",state="open"} 0
# HELP stormguard_breaker_transitions_total Circuit breaker state changes, by previous and new state.
# TYPE stormguard_breaker_transitions_total counter
stormguard_breaker_transitions_total{from="closed",operation="inventory.get",to="half-open"} 0
stormguard_breaker_transitions_total{from="closed",operation="inventory.get",to="open"} 1
stormguard_breaker_transitions_total{from="half-open",operation="inventory.get",to="closed"} 1
stormguard_breaker_transitions_total{from="half-open",operation="inventory.get",to="open"} 0
stormguard_breaker_transitions_total{from="open",operation="inventory.get",to="closed"} 0
stormguard_breaker_transitions_total{from="open",operation="inventory.get",to="half-open"} 1
# HELP stormguard_calls_total Calls that returned, by outcome: success or the reason the call gave up.
# TYPE stormguard_calls_total counter
stormguard_calls_total{operation="inventory.get",outcome="advice"} 0
stormguard_calls_total{operation="inventory.get",outcome="attempts"} %d
stormguard_calls_total{operation="inventory.get",outcome="breaker"} %d
stormguard_calls_total{operation="inventory.get",outcome="budget"} %d
stormguard_calls_total{operation="inventory.get",outcome="context"} 0
stormguard_calls_total{operation="inventory.get",outcome="deadline"} 0
stormguard_calls_total{operation="inventory.get",outcome="nested"} 0
stormguard_calls_total{operation="inventory.get",outcome="overloaded"} 0
stormguard_calls_total{operation="inventory.get",outcome="panic"} 0
stormguard_calls_total{operation="inventory.get",outcome="permanent"} 0
stormguard_calls_total{operation="inventory.get",outcome="success"} %d
stormguard_calls_total{operation="inventory.get",outcome="throttled"} 0
`, reasons["attempts"], reasons["breaker"], reasons["budget"], reasons["success"])
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(expected),
		"stormguard_breaker_state", "stormguard_breaker_transitions_total", "stormguard_calls_total"); err != nil {
		t.Error(err)
	}

	// Every attempt the downstream saw is counted, by kind.
	final := scrapeURL(t, url, clk.Now())
	sum := func(kind string) int {
		n := 0.0
		for _, s := range final.samples {
			if s.Metric[model.MetricNameLabel] == "stormguard_attempts_total" && string(s.Metric["attempt_kind"]) == kind {
				n += float64(s.Value)
			}
		}
		return int(n)
	}
	if sum("first") != d.first || sum("retry") != d.retrys {
		t.Errorf("attempts_total first=%d retry=%d, downstream saw %d and %d", sum("first"), sum("retry"), d.first, d.retrys)
	}
	for _, s := range final.samples {
		if s.Metric[model.MetricNameLabel] == "stormguard_call_duration_seconds_count" {
			if int(s.Value) != calls {
				t.Errorf("call_duration_seconds_count = %v, want %d calls", s.Value, calls)
			}
		}
	}
}

// TestReadmeRetryRatio keeps the README's retry-ratio query the one the
// acceptance test evaluates.
func TestReadmeRetryRatio(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), retryRatioExpr) {
		t.Errorf("README.md does not give the retry ratio as %s", retryRatioExpr)
	}
}
