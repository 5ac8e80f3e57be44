package otelretry_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// contract is the metric list of DESIGN.md: Prometheus name and labels.
var contract = map[string][]string{
	"stormguard_attempts_total":               {"attempt_kind", "operation", "outcome"},
	"stormguard_calls_total":                  {"operation", "outcome"},
	"stormguard_call_duration_seconds":        {"operation"},
	"stormguard_retries_active":               {"operation"},
	"stormguard_retry_budget_exhausted_total": {"operation"},
	"stormguard_retry_budget_tokens":          {"operation"},
	"stormguard_breaker_state":                {"operation", "state"},
	"stormguard_breaker_transitions_total":    {"from", "operation", "to"},
	"stormguard_queue_dropped_records_total":  {"queue"},
	"stormguard_queue_depth":                  {"queue"},
	"stormguard_queue_refused_total":          {"queue"},
	"stormguard_config_reloads_total":         {"result"},
	"stormguard_config_info":                  {"version"},

	"stormguard_throttle_rejection_probability":  {"operation"},
	"stormguard_throttle_local_rejections_total": {"operation"},
	"stormguard_adaptive_fill_rate":              {"operation"},
	"stormguard_adaptive_measured_rate":          {"operation"},
	"stormguard_adaptive_waits_total":            {"operation"},
	"stormguard_adaptive_refused_total":          {"operation"},

	"stormguard_hedges_total":         {"operation", "result"},
	"stormguard_hedges_refused_total": {"operation", "reason"},

	"stormguard_limiter_info": {"limiter", "operation"},
	"stormguard_breaker_info": {"breaker", "operation"},

	"stormguard_keyed_members":              {"operation", "part"},
	"stormguard_keyed_kept":                 {"operation", "part"},
	"stormguard_keyed_evictions_total":      {"operation", "part", "reason"},
	"stormguard_keyed_overflows_total":      {"operation", "part"},
	"stormguard_breaker_open_keys":          {"key", "operation"},
	"stormguard_hedges_group_delay_keys":    {"operation"},
	"stormguard_hedges_group_delay_seconds": {"operation", "stat"},
	"stormguard_hedges_key_delay_seconds":   {"key", "operation"},

	"stormguard_admission_limit":                     {"limiter"},
	"stormguard_admission_in_flight":                 {"limiter"},
	"stormguard_admission_queue_length":              {"limiter"},
	"stormguard_admission_queue_delay_seconds_total": {"limiter"},
	"stormguard_admission_queue_waits_total":         {"limiter"},
	"stormguard_admission_shed_total":                {"limiter", "reason"},
}

// TestPrometheusExporterNames: exported through OpenTelemetry's Prometheus
// exporter with its default name translation, the metrics have exactly the
// names and labels of the promretry module, so the ops/ dashboard and
// alerts work for OTel users too. (Scope and target info are turned off
// here; by default they only add otel_scope_* labels and a target_info
// metric.)
func TestPrometheusExporterNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	obs, err := otelretry.New(otelretry.Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	brk := breaker.New(breaker.Config{ConsecutiveFailures: 1})
	defer brk.Close()
	defer obs.WatchBudget("op", budget.NewRatio(budget.RatioConfig{}))()
	defer obs.WatchBreaker("op", brk)()
	defer obs.WatchLimiter("op", throttle.NewSRE(throttle.SREConfig{}))()
	defer obs.WatchLimiter("put", throttle.NewAdaptive(throttle.AdaptiveConfig{}))()
	kb, err := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kb.Get("https://a:443")
	defer obs.WatchKeyed("keyed", kb)()
	kh, err := hedge.NewAdaptives(keyed.Config{}, hedge.AdaptiveConfig{MinSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	kh.Get("https://a:443").Observe(time.Millisecond)
	defer obs.WatchKeyed("keyed", kh)()
	al, err := admission.New(admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.WatchAdmission("api", al)()
	p := &retry.Policy{Operation: "op", MaxAttempts: 2, Observer: obs, Budget: budgetRefusing{}}
	_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errTransient })
	p.Budget = nil
	p.Breaker = brk // one failure opens it
	_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errTransient })
	p.Breaker = nil
	n := 0
	_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) {
		if n++; n == 1 {
			return 0, errTransient
		}
		return 1, nil
	})
	obs.HedgeStarted(context.Background(), hedge.Event{Operation: "op", Attempt: 2, Hedge: true})
	obs.HedgeRefused(context.Background(), hedge.Event{Operation: "op", Reason: retry.ReasonBudget})
	obs.QueueDropped("q", "full", 1)
	obs.QueueDepth("q", 1)
	obs.QueueRefused("q", 1)
	if ro, ok := any(obs).(reloadObserver); ok {
		ro.ConfigReload("aaaaaaaaaaaa", nil)
		ro.ConfigReload("", errTransient)
	}
	obs.CallEnd(context.Background(), retry.CallEnd{Operation: "op", Attempts: 1, Duration: time.Second})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "stormguard_") {
			continue
		}
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		var names []string
		for l := range labels {
			names = append(names, l)
		}
		sort.Strings(names)
		got[mf.GetName()] = names
	}
	for name, labels := range contract {
		if g, ok := got[name]; !ok {
			t.Errorf("%s missing (exported: %v)", name, keys(got))
		} else if !slices.Equal(g, labels) {
			t.Errorf("%s labels %v, want %v", name, g, labels)
		}
	}
	for name := range got {
		if _, ok := contract[name]; !ok {
			t.Errorf("unexpected metric %s", name)
		}
	}
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type budgetRefusing struct{}

func (budgetRefusing) Record(bool, error)  {}
func (budgetRefusing) Withdraw(error) bool { return false }
