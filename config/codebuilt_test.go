package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/throttle"
)

// applyCodeBuilt applies f to a new Registry, failing the test if Apply
// panics, and returns the Registry (closed at the test's end) and Apply's
// error.
func applyCodeBuilt(t *testing.T, f *File) (*Registry, error) {
	t.Helper()
	r := NewRegistry(Options{Logger: discard})
	t.Cleanup(func() { r.Close() })
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("Apply panicked: %v", v)
			}
		}()
		err = r.Apply(f)
	}()
	return r, err
}

// TestCodeBuiltFileWithoutNameServesItsPolicy: a File built in code whose
// PolicySpec leaves Name empty serves the policy under its key, not the
// zero Policy (the handle used to look the built policy up by Name).
func TestCodeBuiltFileWithoutNameServesItsPolicy(t *testing.T) {
	f := &File{
		Policies:   map[string]*PolicySpec{"payments": {MaxAttempts: 5, Breaker: &BreakerSpec{Kind: "consecutive", Config: breaker.Config{ConsecutiveFailures: 2}}}},
		Operations: map[string]string{"charge": "payments"},
	}
	r, err := applyCodeBuilt(t, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"charge", "payments"} {
		p := r.Policy(name).Policy()
		if p.Breaker == nil || p.MaxAttempts != 5 {
			t.Errorf("%s: the handle serves MaxAttempts %d, Breaker %v; want the payments policy (5, a breaker)", name, p.MaxAttempts, p.Breaker)
		}
	}
}

// TestCodeBuiltNameOtherThanKeyIsRefused: a PolicySpec whose Name is not
// its key is refused with a *config.Error naming both, and nothing is
// applied.
func TestCodeBuiltNameOtherThanKeyIsRefused(t *testing.T) {
	f := &File{Policies: map[string]*PolicySpec{"payments": {Name: "billing", MaxAttempts: 5}}}
	r, err := applyCodeBuilt(t, f)
	var fe *Error
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `"billing"`) || !strings.Contains(err.Error(), `"payments"`) || fe.Problems[0].Path != "policies.payments" {
		t.Fatalf("Apply = %v, want a *config.Error at policies.payments naming billing and payments", err)
	}
	if r.Version() != "" || r.Policy("payments").Spec() != nil {
		t.Fatal("the refused file was applied")
	}
}

// TestCodeBuiltInvalidPartsAreErrors: Apply of a File built in code whose
// breaker, budget or limiter config its constructor refuses (by
// panicking) returns a *config.Error naming the field, every problem at
// once, instead of panicking (once re-raised as ErrHookPanic). Kinds that
// would build nothing (no budget, no limiter: no protection) are refused
// too.
func TestCodeBuiltInvalidPartsAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *PolicySpec
		path string
	}{
		{"breaker", &PolicySpec{Breaker: &BreakerSpec{Kind: "consecutive", Config: breaker.Config{ConsecutiveFailures: -1}}}, "policies.p.breaker"},
		{"ratio budget", &PolicySpec{Budget: &BudgetSpec{Kind: "ratio", Ratio: budget.RatioConfig{MaxTokens: -1}}}, "policies.p.budget"},
		{"window budget", &PolicySpec{Budget: &BudgetSpec{Kind: "window", Window: budget.WindowConfig{Ratio: 20}}}, "policies.p.budget"},
		{"concurrency budget", &PolicySpec{Budget: &BudgetSpec{Kind: "concurrency", Concurrency: budget.ConcurrencyConfig{Ratio: 2}}}, "policies.p.budget"},
		{"budget kind", &PolicySpec{Budget: &BudgetSpec{Kind: "percent"}}, "policies.p.budget"},
		{"shared window budget", &PolicySpec{Budget: &BudgetSpec{Kind: "window", Shared: "redis"}}, "policies.p.budget"},
		{"nested budget", &PolicySpec{Nested: NestedSpec{Budget: &BudgetSpec{Kind: "ratio", Ratio: budget.RatioConfig{Threshold: 50}}}}, "policies.p.nested.budget"},
		{"sre limiter", &PolicySpec{Limiter: &LimiterSpec{Kind: LimiterSRE, SRE: throttle.SREConfig{K: -3}}}, "policies.p.limiter"},
		{"adaptive limiter", &PolicySpec{Limiter: &LimiterSpec{Kind: LimiterAWSAdaptive, Adaptive: throttle.AdaptiveConfig{Beta: 7}}}, "policies.p.limiter"},
		{"limiter kind", &PolicySpec{Limiter: &LimiterSpec{Kind: "sre2"}}, "policies.p.limiter"},
		{"throttle_on", &PolicySpec{Limiter: &LimiterSpec{Kind: LimiterSRE, ThrottleOn: []string{"503"}}}, "policies.p.limiter"},
		{"empty throttle_on", &PolicySpec{Limiter: &LimiterSpec{Kind: LimiterSRE, ThrottleOn: []string{}}}, "policies.p.limiter"},
		{"keys", &PolicySpec{Breaker: &BreakerSpec{Kind: "consecutive", Keys: &KeySpec{Per: PerHost, MaxKeys: -1}}}, "policies.p.breaker"},
		{"nil spec", nil, "policies.p"},
	} {
		_, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"p": tc.spec}})
		var fe *Error
		if !errors.As(err, &fe) || len(fe.Problems) != 1 || fe.Problems[0].Path != tc.path {
			t.Errorf("%s: Apply = %v, want a *config.Error at %s", tc.name, err, tc.path)
		}
	}
	// Every problem at once, in policy order.
	_, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{
		"a": {Breaker: &BreakerSpec{Config: breaker.Config{MaxProbes: -1}}},
		"b": {Budget: &BudgetSpec{Kind: "ratio", Ratio: budget.RatioConfig{MaxTokens: -1}}, Limiter: &LimiterSpec{Kind: "x"}},
	}})
	var fe *Error
	if !errors.As(err, &fe) || len(fe.Problems) != 3 || fe.Problems[0].Path != "policies.a.breaker" || fe.Problems[2].Path != "policies.b.limiter" {
		t.Fatalf("Apply = %v, want three problems", err)
	}
}
