package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

const limiterFile = `
policies:
  users:
    max_attempts: %s
    limiter: {kind: sre, k: %s, window: 1m, buckets: 6, max_rejection: 0.9, min_requests: 0}
  uploads:
    limiter: {kind: aws_adaptive, beta: 0.5, scale_constant: 0.8, smoothing: 0.6, min_fill_rate: 2}
operations:
  get-user: users
  put-object: uploads
`

func writeLimiterFile(t *testing.T, path, attempts, k string) {
	t.Helper()
	data := []byte(fmt.Sprintf(limiterFile, attempts, k))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLimiterFromFile reads limiters from a real file: the SRE throttler
// and the AWS adaptive limiter are built with the file's settings on the
// Registry's clock, become Policy.Limiter, shed load in real calls, and
// are kept across a reload that leaves their settings alone (same
// instance, same counts) and replaced by one that changes K.
func TestLimiterFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writeLimiterFile(t, path, "2", "1.5")
	clk := clocktest.NewFake()
	r, err := Open(path, Options{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Policy("get-user")
	sre, ok := h.Policy().Limiter.(*throttle.SRE)
	if !ok {
		t.Fatalf("get-user's Limiter is %T, want *throttle.SRE", h.Policy().Limiter)
	}
	spec := h.Spec().Limiter
	if c := spec.SRE; spec.Kind != LimiterSRE || c.K != 1.5 || c.Window != time.Minute || c.Buckets != 6 || c.MaxRejection != 0.9 || c.MinRequests != -1 {
		t.Fatalf("spec %+v", spec)
	}
	if a, ok := r.Policy("put-object").Policy().Limiter.(*throttle.Adaptive); !ok {
		t.Fatalf("put-object's Limiter is %T, want *throttle.Adaptive", r.Policy("put-object").Policy().Limiter)
	} else if got := r.Policy("put-object").Spec().Limiter.Adaptive; got.Beta != 0.5 || got.ScaleConstant != 0.8 || got.Smoothing != 0.6 || got.MinFillRate != 2 || a.Stats().Enabled {
		t.Fatalf("adaptive spec %+v, stats %+v", got, a.Stats())
	}

	// Every call is answered "overloaded": each counts as a request (the
	// locally rejected ones too) and none as an accept.
	busy := retry.Overloaded(errors.New("users: busy"))
	var throttled, sent int
	const calls = 40
	for range calls {
		err := retry.Run(context.Background(), h.Policy(), func(context.Context) error { sent++; return busy })
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	st := sre.Stats()
	if st.Requests != calls || st.Accepts != 0 || int(st.Rejected) != throttled || throttled+sent != calls {
		t.Fatalf("stats %+v after %d calls, %d sent, %d throttled", st, calls, sent, throttled)
	}
	// max(0, (40 − 1.5·0)/(40+1)), capped at max_rejection 0.9.
	if p := sre.RejectionProbability(); p != 0.9 {
		t.Fatalf("rejection probability %v, want the cap 0.9", p)
	}

	// A reload that changes only max_attempts keeps the throttler and its counts.
	writeLimiterFile(t, path, "3", "1.5")
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Policy().MaxAttempts != 3 || h.Policy().Limiter != sre || sre.Stats().Requests != calls {
		t.Fatalf("after an unrelated change: attempts %d, limiter %p (was %p), requests %d",
			h.Policy().MaxAttempts, h.Policy().Limiter, sre, sre.Stats().Requests)
	}

	// A reload that changes K starts a fresh throttler.
	writeLimiterFile(t, path, "3", "1.1")
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	fresh, ok := h.Policy().Limiter.(*throttle.SRE)
	if !ok || fresh == sre || fresh.Stats().Requests != 0 || fresh.RejectionProbability() != 0 {
		t.Fatalf("after changing k: limiter %T %p (old %p)", h.Policy().Limiter, h.Policy().Limiter, sre)
	}
	if h.Spec().Limiter.SRE.K != 1.1 {
		t.Fatalf("k = %v", h.Spec().Limiter.SRE.K)
	}
}

// TestLimiterRemovedAndKept: a limiter is kept across a reload that leaves
// its settings alone, and removing it from the file removes it from the
// policy.
func TestLimiterRemovedAndKept(t *testing.T) {
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(mustParse(t, "policies: {a: {limiter: {kind: aws_adaptive}}}")); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("a")
	first := h.Policy().Limiter
	if _, ok := first.(*throttle.Adaptive); !ok {
		t.Fatalf("limiter %T", first)
	}
	if err := r.Apply(mustParse(t, "policies: {a: {max_attempts: 2, limiter: {kind: aws_adaptive}}}")); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Limiter != first {
		t.Fatal("an unchanged limiter was replaced")
	}
	if err := r.Apply(mustParse(t, "policies: {a: {max_attempts: 2}}")); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Limiter != nil {
		t.Fatalf("a removed limiter stayed: %T", h.Policy().Limiter)
	}
}

// TestLimiterWatchers: an Options.OnLimiter and a LimiterWatcher in a
// retry.Multi hear each operation's limiter, again when a reload replaces
// it, and are unwatched when it goes.
func TestLimiterWatchers(t *testing.T) {
	var events []string
	w := &limiterRecorder{events: &events}
	r := NewRegistry(Options{Logger: discard, Observer: retry.Multi(w, w)})
	apply := func(src string) {
		t.Helper()
		if err := r.Apply(mustParse(t, src)); err != nil {
			t.Fatal(err)
		}
	}
	apply("policies: {a: {limiter: {kind: sre}}}\noperations: {get: a}")
	apply("policies: {a: {max_attempts: 2, limiter: {kind: sre}}}\noperations: {get: a}") // kept: no event
	apply("policies: {a: {limiter: {kind: sre, k: 3}}}\noperations: {get: a}")
	apply("policies: {a: {}}\noperations: {get: a}")
	want := []string{"watch get *throttle.SRE", "watch get *throttle.SRE",
		"watch get *throttle.SRE", "watch get *throttle.SRE", "unwatch get", "unwatch get",
		"unwatch get", "unwatch get"}
	if len(events) != len(want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %q, want %q", events, want)
		}
	}
}

type limiterRecorder struct {
	retry.NopObserver
	events *[]string
}

func (l *limiterRecorder) WatchLimiter(op string, lim retry.Limiter) func() {
	*l.events = append(*l.events, fmt.Sprintf("watch %s %T", op, lim))
	return func() { *l.events = append(*l.events, "unwatch "+op) }
}

// TestPolicyPresetAWS: preset aws_standard_2026 (and its DynamoDB and
// legacy siblings) is the whole AWS policy: attempts, the rules' backoff
// (an ErrorBackoff), the quota and the AWS classification; fields written
// beside it override it.
func TestPolicyPresetAWS(t *testing.T) {
	f := mustParse(t, `
policies:
  s3: {preset: aws_standard_2026}
  ddb: {preset: aws_standard_2026_dynamodb}
  old: {preset: aws_standard_legacy}
  tuned:
    preset: aws_standard_2026
    max_attempts: 5
    backoff: {strategy: constant, base: 10ms}
    budget: {kind: ratio, preset: ten_percent}
`)
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		attempts int
		backoff  any
		quota    budget.RatioConfig
	}{
		{"s3", 3, awsretry.Rules{}, awsretry.Standard2026()},
		{"ddb", 4, awsretry.Rules{DynamoDB: true}, awsretry.Standard2026()},
		{"old", 3, awsretry.LegacyRules{}, awsretry.StandardLegacy()},
	} {
		p, spec := r.Policy(tc.name).Policy(), f.Policies[tc.name]
		if p.MaxAttempts != tc.attempts || p.Backoff != tc.backoff || spec.Backoff.Strategy != "" {
			t.Errorf("%s: attempts %d backoff %#v (spec %q)", tc.name, p.MaxAttempts, p.Backoff, spec.Backoff.Strategy)
		}
		if spec.Budget == nil || spec.Budget.Kind != "ratio" || spec.Budget.Ratio != tc.quota {
			t.Errorf("%s: budget %+v, want %+v", tc.name, spec.Budget, tc.quota)
		}
		if _, ok := p.Budget.(*budget.Ratio); !ok {
			t.Errorf("%s: Budget %T", tc.name, p.Budget)
		}
		if _, ok := p.Backoff.(retry.ErrorBackoff); tc.name != "old" && !ok {
			t.Errorf("%s: the preset's backoff is not an ErrorBackoff", tc.name)
		}
		// The AWS classification: a plain error is not transient, a 500-class code is.
		if p.Classify == nil || p.Classify(errors.New("bad input")) || !p.Classify(awsCoded("ThrottlingException")) {
			t.Errorf("%s: Classify is not awsretry.IsRetryable", tc.name)
		}
	}
	tuned := r.Policy("tuned").Policy()
	if tuned.MaxAttempts != 5 || tuned.Backoff.Delay(1, 0) != 10*time.Millisecond || f.Policies["tuned"].Budget.Ratio != budget.TenPercent() {
		t.Fatalf("explicit fields did not override the preset: %+v", tuned)
	}
	if tuned.Classify == nil || tuned.Classify(errors.New("bad input")) {
		t.Fatal("the preset's classification was lost by overriding other fields")
	}
}

type awsCoded string

func (e awsCoded) Error() string     { return string(e) }
func (e awsCoded) ErrorCode() string { return string(e) }

// TestBudgetPresetsAWS: the budget presets name the AWS quotas, and
// aws_standard keeps meaning the legacy one.
func TestBudgetPresetsAWS(t *testing.T) {
	f := mustParse(t, `
policies:
  new: {budget: {kind: ratio, preset: aws_standard_2026}}
  legacy: {budget: {kind: ratio, preset: aws_standard_legacy}}
  old_name: {budget: {kind: ratio, preset: aws_standard}}
  cheaper: {budget: {kind: ratio, preset: aws_standard_2026, throttle_cost: 2}}
`)
	for name, want := range map[string]budget.RatioConfig{
		"new": awsretry.Standard2026(), "legacy": awsretry.StandardLegacy(), "old_name": awsretry.StandardLegacy(),
	} {
		if got := f.Policies[name].Budget.Ratio; got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	want := awsretry.Standard2026()
	want.ThrottleCost = 2
	if got := f.Policies["cheaper"].Budget.Ratio; got != want {
		t.Errorf("cheaper: %+v", got)
	}
}

// TestREADMEPolicyBlocksParse: every YAML block of the README is a valid
// policy file.
func TestREADMEPolicyBlocksParse(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```yaml\n")[1:]
	if len(blocks) < 2 {
		t.Fatalf("%d YAML blocks in the README", len(blocks))
	}
	for i, b := range blocks {
		src, _, _ := strings.Cut(b, "```")
		f, err := Parse(fmt.Sprintf("README block %d", i+1), []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		redis := newFakeKeyedStore() // a block may say shared: redis, with per too
		if err := NewRegistry(Options{Logger: discard, Shared: map[string]SharedStore{"redis": redis}}).Apply(f); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFileThrottleCostSeesAWSCodes: a ratio budget written in a file
// charges its throttle_cost for an AWS throttling code (an HTTP 400
// ThrottlingException), as it did before the AWS rules left package
// budget, whatever preset it starts from.
func TestFileThrottleCostSeesAWSCodes(t *testing.T) {
	f := mustParse(t, `
policies:
  plain: {budget: {kind: ratio, max_tokens: 100, retry_cost: 10, throttle_cost: 1}}
  preset: {budget: {kind: ratio, preset: ten_percent, throttle_cost: 1}}
`)
	for _, name := range []string{"plain", "preset"} {
		cfg := f.Policies[name].Budget.Ratio
		if cfg.Throttles == nil || !cfg.Throttles.IsThrottle(awsCoded("ThrottlingException")) {
			t.Fatalf("%s: Throttles %v does not see an AWS throttling code", name, cfg.Throttles)
		}
		b := budget.NewRatio(cfg)
		before := b.Available()
		if !b.Withdraw(awsCoded("ThrottlingException")) {
			t.Fatalf("%s: refused", name)
		}
		if paid := before - b.Available(); paid != cfg.ThrottleCost {
			t.Errorf("%s: a throttled retry paid %v, want throttle_cost %v", name, paid, cfg.ThrottleCost)
		}
	}
}
