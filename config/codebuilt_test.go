package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
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

// TestCodeBuiltOperationToMissingPolicyIsRefused: File.covers counted any
// operation listed under Operations as covered, whatever policy it named,
// so a File built in code whose operation names a policy it does not hold
// (a typo; Parse refuses it) was applied, and the handle in use silently
// served the zero Policy: no breaker, no budget. Apply refuses it at
// operations.NAME, and so a default naming no policy, and the policies in
// force keep serving.
func TestCodeBuiltOperationToMissingPolicyIsRefused(t *testing.T) {
	r := NewRegistry(Options{Logger: discard})
	defer r.Close()
	spec := func() *PolicySpec {
		return &PolicySpec{MaxAttempts: 3, Breaker: &BreakerSpec{Kind: "consecutive", Config: breaker.Config{ConsecutiveFailures: 2}}}
	}
	if err := r.Apply(&File{Version: "1", Policies: map[string]*PolicySpec{"payments": spec()}, Operations: map[string]string{"charge": "payments"}}); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("charge")
	brk := h.Policy().Breaker
	if brk == nil {
		t.Fatal("no breaker before the reload")
	}
	for name, f := range map[string]*File{
		"operation": {Version: "2", Policies: map[string]*PolicySpec{"payments": spec()}, Operations: map[string]string{"charge": "paymnets"}},
		"default":   {Version: "3", Policies: map[string]*PolicySpec{"payments": spec()}, Default: "paymnets"},
	} {
		err := r.Apply(f)
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), `policy "paymnets" is not defined`) {
			t.Errorf("%s: Apply = %v, want a *config.Error: policy \"paymnets\" is not defined", name, err)
		}
		if r.Version() != "1" || h.Policy().Breaker != brk {
			t.Errorf("%s: version %q, charge's breaker %v; want version 1 and its breaker kept", name, r.Version(), h.Policy().Breaker)
		}
	}
	_, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"p": {}}, Operations: map[string]string{"op": "nope"}})
	var fe *Error
	if !errors.As(err, &fe) || fe.Problems[0].Path != "operations.op" {
		t.Errorf("Apply to a new Registry = %v, want a *config.Error at operations.op", err)
	}
}

// TestCodeBuiltBackoffIsChecked: a BackoffSpec that backoff.New refuses
// (a misspelt strategy, a max below base, a negative base) was applied:
// build ignored the error ("validated by Parse") and the policy silently
// served retry.DefaultBackoff. Apply refuses each at policies.p.backoff;
// Params without a Strategy (which would be ignored) too. An empty
// BackoffSpec is still retry.DefaultBackoff, a preset's backoff with one.
func TestCodeBuiltBackoffIsChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		b    BackoffSpec
		want string
	}{
		"misspelt strategy": {BackoffSpec{Strategy: "exponentail", Params: backoff.Params{Base: time.Second}}, `strategy "exponentail" is not a registered strategy`},
		"max below base":    {BackoffSpec{Strategy: "constant", Params: backoff.Params{Base: 2 * time.Second, Max: time.Second}}, "max is below base"},
		"negative base":     {BackoffSpec{Strategy: "full_jitter", Params: backoff.Params{Base: -time.Second}}, "durations must not be negative"},
		"no strategy":       {BackoffSpec{Params: backoff.Params{Base: time.Second}}, "Params are given without a Strategy"},
	} {
		r, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"p": {MaxAttempts: 3, Backoff: tc.b}}})
		var fe *Error
		if !errors.As(err, &fe) || fe.Problems[0].Path != "policies.p.backoff" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Apply = %v, want a *config.Error at policies.p.backoff: %s (the policy serves Backoff %v)", name, err, tc.want, r.Policy("p").Policy().Backoff)
		}
	}
	r, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"plain": {}, "aws": {Preset: PresetAWSStandard2026}}})
	if err != nil {
		t.Fatal(err)
	}
	if b := r.Policy("plain").Policy().Backoff; b != nil {
		t.Errorf("empty BackoffSpec: Backoff %v, want nil (retry.DefaultBackoff)", b)
	}
	if _, ok := r.Policy("aws").Policy().Backoff.(awsretry.Rules); !ok {
		t.Errorf("preset without strategy: Backoff %T, want the preset's awsretry.Rules", r.Policy("aws").Policy().Backoff)
	}
}

// TestCodeBuiltKeySpecsAreChecked: Parse refuses keyed parts of one
// policy keyed by different things ("a call carries one key") and a per
// other than host or method, but Apply checked only MaxKeys and Idle, so
// a code-built File with either was applied: KeyPer answered the first
// part's per while the budget was meant per method, or a word no adapter
// knows; a fixed hedge delay with Keys (which Parse refuses: it needs
// adaptive) had its Keys ignored while KeyPer answered them. Apply
// refuses each at the part's per.
func TestCodeBuiltKeySpecsAreChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		s    *PolicySpec
		path string
	}{
		"different per": {&PolicySpec{
			Breaker: &BreakerSpec{Kind: "consecutive", Keys: &KeySpec{Per: PerHost}},
			Budget:  &BudgetSpec{Kind: "ratio", Keys: &KeySpec{Per: PerMethod}},
		}, "policies.p.budget.per"},
		"unknown per":         {&PolicySpec{Breaker: &BreakerSpec{Kind: "consecutive", Keys: &KeySpec{Per: "hots"}}}, "policies.p.breaker.per"},
		"per none":            {&PolicySpec{Limiter: &LimiterSpec{Kind: LimiterSRE, Keys: &KeySpec{Per: PerNone}}}, "policies.p.limiter.per"},
		"per empty":           {&PolicySpec{Budget: &BudgetSpec{Kind: "ratio", Keys: &KeySpec{}}}, "policies.p.budget.per"},
		"fixed hedge per key": {&PolicySpec{MaxAttempts: 3, Hedge: &HedgeSpec{Delay: time.Second, MaxHedges: 1, Keys: &KeySpec{Per: PerHost}}}, "policies.p.hedge.per"},
	} {
		r, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"p": tc.s}})
		var fe *Error
		if !errors.As(err, &fe) || fe.Problems[0].Path != tc.path {
			t.Errorf("%s: Apply = %v, want a *config.Error at %s (KeyPer serves %q)", name, err, tc.path, r.Policy("p").KeyPer())
		}
	}
	same := &PolicySpec{
		Breaker: &BreakerSpec{Kind: "consecutive", Keys: &KeySpec{Per: PerMethod}},
		Budget:  &BudgetSpec{Kind: "ratio", Keys: &KeySpec{Per: PerMethod}},
	}
	if r, err := applyCodeBuilt(t, &File{Policies: map[string]*PolicySpec{"p": same}}); err != nil || r.Policy("p").KeyPer() != PerMethod {
		t.Errorf("breaker and budget per method: Apply = %v", err)
	}
}

// TestCodeBuiltAdmissionIsChecked: a code-built AdmissionSpec whose
// Algorithm was misspelt was served as gradient2 (NewLimiter's default
// branch), with no error and no log; one its package refuses (fixed
// without N) was served the default settings, logged only. Apply refuses
// both at admission.NAME, and the admission handle keeps its Limiter.
func TestCodeBuiltAdmissionIsChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		s    *AdmissionSpec
		want string
	}{
		"misspelt algorithm": {&AdmissionSpec{Algorithm: "fixd", Fixed: admission.Fixed{N: 10}}, `algorithm "fixd" is not one of gradient2, vegas, aimd, fixed`},
		"fixed without N":    {&AdmissionSpec{Algorithm: AlgorithmFixed}, "admission.api: "},
		"nil":                {nil, "no spec"},
	} {
		r := NewRegistry(Options{Logger: discard})
		if err := r.Apply(&File{Version: "1", Policies: map[string]*PolicySpec{"p": {}}, Admission: map[string]*AdmissionSpec{"api": {Algorithm: AlgorithmFixed, Fixed: admission.Fixed{N: 7}}}}); err != nil {
			t.Fatal(err)
		}
		h := r.Admission("api")
		err := r.Apply(&File{Version: "2", Policies: map[string]*PolicySpec{"p": {}}, Admission: map[string]*AdmissionSpec{"api": tc.s}})
		var fe *Error
		if !errors.As(err, &fe) || fe.Problems[0].Path != "admission.api" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Apply = %v, want a *config.Error at admission.api (%s)", name, err, tc.want)
		}
		if got := h.Limiter().Limit(); got != 7 {
			t.Errorf("%s: the handle serves a limit of %d, want 7 (the block in force)", name, got)
		}
		r.Close()
	}
}
