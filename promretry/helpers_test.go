package promretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tb is the part of testing.TB the helpers need; *rapid.T has it too.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// step is one scripted attempt: it takes took on the fake clock, then
// returns err.
type step struct {
	took time.Duration
	err  error
}

// scripted returns an operation that plays steps in order, one per
// attempt, and succeeds once they run out. Time passes on clk only.
func scripted(clk *clocktest.Fake, steps ...step) func(context.Context) (int, error) {
	n := 0
	return func(ctx context.Context) (int, error) {
		var s step
		if n < len(steps) {
			s = steps[n]
		}
		n++
		if s.took > 0 {
			clk.Advance(s.took)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return n, s.err
	}
}

// newPolicy returns a policy on clk that retries at once (no backoff
// wait), observed by obs.
func newPolicy(op string, clk *clocktest.Fake, obs retry.Observer) *retry.Policy {
	return &retry.Policy{
		Operation:   op,
		MaxAttempts: 4,
		Backoff:     backoff.Constant{},
		Clock:       clk,
		Observer:    obs,
	}
}

// registry returns a pedantic registry holding c.
func registry(t tb, c *promretry.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register: %v", err)
	}
	return reg
}

// find returns the series of family name whose labels include the given
// name/value pairs, or nil.
func find(t tb, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// value returns the value of a counter or gauge series, or the sample
// count of a histogram; it fails the test if the series is missing.
func value(t tb, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m := find(t, g, name, labels...)
	switch {
	case m == nil:
		t.Fatalf("no series %s%v", name, labels)
		return 0
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("series %s%v has no value", name, labels)
	return 0
}
