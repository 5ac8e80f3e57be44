package adaptertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both adapters implement every optional interface config and queue look
// for.
var (
	_ config.ReloadObserver   = (*promretry.Collector)(nil)
	_ config.BudgetWatcher    = (*promretry.Collector)(nil)
	_ config.BreakerWatcher   = (*promretry.Collector)(nil)
	_ queue.RefusedObserver   = (*promretry.Collector)(nil)
	_ config.ReloadObserver   = (*otelretry.Observer)(nil)
	_ config.BudgetWatcher    = (*otelretry.Observer)(nil)
	_ config.BreakerWatcher   = (*otelretry.Observer)(nil)
	_ queue.RefusedObserver   = (*otelretry.Observer)(nil)
	_ config.LimiterWatcher   = (*promretry.Collector)(nil)
	_ config.LimiterWatcher   = (*otelretry.Observer)(nil)
	_ config.AdaptiveWatcher  = (*promretry.Collector)(nil)
	_ config.AdaptiveWatcher  = (*otelretry.Observer)(nil)
	_ config.AdaptivesWatcher = (*promretry.Collector)(nil)
	_ config.AdaptivesWatcher = (*otelretry.Observer)(nil)
)

// adapters returns a promretry Collector and an otelretry Observer, each
// behind a Prometheus registry that exposes what it exports under the same
// metric names (the Observer through OpenTelemetry's Prometheus exporter).
func adapters(t *testing.T) (*promretry.Collector, *otelretry.Observer, map[string]*prometheus.Registry) {
	t.Helper()
	promReg, otelReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	coll := promretry.New(promretry.Config{})
	promReg.MustRegister(coll)
	exp, err := otelprom.New(otelprom.WithRegisterer(otelReg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := otelretry.New(otelretry.Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	return coll, obs, map[string]*prometheus.Registry{"promretry": promReg, "otelretry": otelReg}
}

// series returns the value of every series of metric name, keyed by its
// labels ("operation=charge-card,state=open"), read from reg.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for i, lp := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += lp.GetName() + "=" + lp.GetValue()
			}
			out[key] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// operations returns the operation label values of metric name.
func operations(t *testing.T, reg *prometheus.Registry, name string) map[string]bool {
	t.Helper()
	mfs, _ := reg.Gather()
	out := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "operation" {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}

const policies = `
policies:
  payments:
    max_attempts: 1
    budget: {kind: ratio, max_tokens: %d}
    breaker: {kind: consecutive, failures: 2}
operations:
  charge-card: payments
  refund: payments
`

func write(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // rename-on-save, as editors do
		t.Fatal(err)
	}
}

func next(t *testing.T, reloads <-chan error) error {
	t.Helper()
	select {
	case err := <-reloads:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
		return nil
	}
}

// TestRegistryWithMultiOfAdapters (issue #25 papercuts 5 and 6): with the
// observer given as retry.Multi(promretry, otelretry), as the READMEs
// advise, a Registry loaded from a real file and watched reports every
// reload to both adapters, and hands them each operation's budget and
// breaker under the operation's name — the label the call metrics carry —
// so budget tokens and breaker state join the calls on operation, in both.
// A reload that replaces the budget re-points the tokens series.
func TestRegistryWithMultiOfAdapters(t *testing.T) {
	coll, obs, regs := adapters(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write(t, path, fmt.Sprintf(policies, 7))
	reloads := make(chan error, 16)
	reg, err := config.Open(path, config.Options{
		Observer: retry.Multi(coll, obs),
		OnReload: func(_ string, err error) { reloads <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	<-reloads
	w, err := reg.Watch(path, config.WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	h := reg.Policy("charge-card")
	fail := errors.New("connection reset")
	for range 2 { // two failed calls open the consecutive breaker
		if err := retry.Run(context.Background(), h.Policy(), func(context.Context) error { return fail }); !errors.Is(err, fail) {
			t.Fatalf("call: %v", err)
		}
	}
	if err := retry.Run(context.Background(), h.Policy(), func(context.Context) error { return nil }); err == nil {
		t.Fatal("the breaker did not open")
	}
	version := reg.Version()
	for name, r := range regs {
		if got := series(t, r, "stormguard_config_reloads_total")["result=success"]; got != 1 {
			t.Errorf("%s: reloads{success} = %v, want 1", name, got)
		}
		if got := series(t, r, "stormguard_config_info")["version="+version]; got != 1 {
			t.Errorf("%s: config_info{version=%s} = %v, want 1", name, version, got)
		}
		tokens := series(t, r, "stormguard_retry_budget_tokens")
		if _, ok := tokens["operation=payments"]; ok {
			t.Errorf("%s: budget labelled with the policy name: %v", name, tokens)
		}
		if len(tokens) != 2 || tokens["operation=charge-card"] != tokens["operation=refund"] {
			t.Errorf("%s: tokens %v, want one shared budget under charge-card and refund", name, tokens)
		}
		if got := series(t, r, "stormguard_breaker_state")["operation=charge-card,state=open"]; got != 1 {
			t.Errorf("%s: breaker_state{charge-card,open} = %v, want 1", name, got)
		}
		if got := series(t, r, "stormguard_calls_total")["operation=charge-card,outcome=breaker"]; got != 1 {
			t.Errorf("%s: calls{charge-card,breaker} = %v, want 1", name, got)
		}
		// The join: every operation with calls has its budget and breaker
		// series under the same label value.
		calls := operations(t, r, "stormguard_calls_total")
		for _, m := range []string{"stormguard_retry_budget_tokens", "stormguard_breaker_state"} {
			if ops := operations(t, r, m); !ops["charge-card"] || len(calls) == 0 {
				t.Errorf("%s: %s operations %v do not join the calls' %v", name, m, ops, calls)
			}
		}
	}

	// A bad edit: both count a failure, the version stays.
	write(t, path, "policies: {payments: {max_attempts: lots}}\n")
	if err := next(t, reloads); err == nil {
		t.Fatal("the bad edit was applied")
	}
	// A new budget (another max_tokens): the tokens series follow it.
	write(t, path, fmt.Sprintf(policies, 3))
	if err := next(t, reloads); err != nil {
		t.Fatal(err)
	}
	want := h.Policy().Budget.(interface{ Available() float64 }).Available()
	for name, r := range regs {
		if got := series(t, r, "stormguard_config_reloads_total")["result=failure"]; got != 1 {
			t.Errorf("%s: reloads{failure} = %v, want 1", name, got)
		}
		tokens := series(t, r, "stormguard_retry_budget_tokens")
		if len(tokens) != 2 || tokens["operation=charge-card"] != want || want != 3 {
			t.Errorf("%s: tokens after the reload %v, want the new budget's %v under charge-card and refund", name, tokens, want)
		}
	}
}

const limiterPolicies = `
policies:
  users:
    max_attempts: %d
    limiter: {kind: sre, k: %s, min_requests: 0}
  uploads:
    limiter: {kind: aws_adaptive}
operations:
  get-user: users
  list-users: users
  put-object: uploads
`

// TestRegistryLimitersWithAdapters: limiters from a real file reach both
// adapters through retry.Multi, a shared one once under its own label
// (joined to each operation by stormguard_limiter_info); the
// calls a real SRE throttler ends are counted as outcome "throttled" and
// as local rejections alike; a reload that keeps the limiter's settings
// keeps the instance and its series, and one that changes K starts a new
// throttler while the local rejections counter goes on from the old count.
func TestRegistryLimitersWithAdapters(t *testing.T) {
	coll, obs, regs := adapters(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write(t, path, fmt.Sprintf(limiterPolicies, 1, "1.1"))
	reg, err := config.Open(path, config.Options{Observer: retry.Multi(coll, obs), Clock: clocktest.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("get-user")
	sre, ok := h.Policy().Limiter.(*throttle.SRE)
	if !ok {
		t.Fatalf("Limiter %T", h.Policy().Limiter)
	}
	busy := retry.Overloaded(errors.New("users: busy"))
	throttled := 0
	for range 100 {
		err := retry.Run(context.Background(), h.Policy(), func(context.Context) error { return busy })
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	if throttled == 0 || uint64(throttled) != sre.Stats().Rejected {
		t.Fatalf("%d throttled, SRE counted %d", throttled, sre.Stats().Rejected)
	}
	check := func(when string, wantRejected int, wantProb float64) {
		t.Helper()
		for name, r := range regs {
			if got := series(t, r, "stormguard_calls_total")["operation=get-user,outcome=throttled"]; got != float64(throttled) {
				t.Errorf("%s %s: calls{get-user,throttled} = %v, want %d", when, name, got, throttled)
			}
			// The throttler get-user and list-users share is exported once,
			// under its own label, and limiter_info joins each operation to it.
			const shared = "operation=_shared:get-user,list-users"
			rej := series(t, r, "stormguard_throttle_local_rejections_total")
			if len(rej) != 1 || rej[shared] != float64(wantRejected) {
				t.Errorf("%s %s: local_rejections %v, want %d once under %s", when, name, rej, wantRejected, shared)
			}
			prob := series(t, r, "stormguard_throttle_rejection_probability")
			if len(prob) != 1 || prob[shared] != wantProb {
				t.Errorf("%s %s: rejection_probability %v, want %v", when, name, prob, wantProb)
			}
			info := series(t, r, "stormguard_limiter_info")
			for _, op := range []string{"get-user", "list-users"} {
				if info["limiter=_shared:get-user,list-users,operation="+op] != 1 {
					t.Errorf("%s %s: limiter_info %v does not join %s to the shared throttler", when, name, info, op)
				}
			}
			if _, ok := series(t, r, "stormguard_adaptive_fill_rate")["operation=put-object"]; !ok {
				t.Errorf("%s %s: no adaptive_fill_rate for put-object", when, name)
			}
			if _, ok := series(t, r, "stormguard_adaptive_refused_total")["operation=put-object"]; !ok {
				t.Errorf("%s %s: no adaptive_refused_total for put-object", when, name)
			}
		}
	}
	check("first file", throttled, sre.RejectionProbability())

	write(t, path, fmt.Sprintf(limiterPolicies, 2, "1.1")) // the limiter's settings unchanged
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Limiter != sre || h.Policy().MaxAttempts != 2 {
		t.Fatal("an unchanged limiter was replaced")
	}
	check("same settings", throttled, sre.RejectionProbability())

	write(t, path, fmt.Sprintf(limiterPolicies, 2, "3")) // a new K
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Limiter == sre {
		t.Fatal("changing k kept the old throttler")
	}
	check("new k", throttled, 0)
}
