package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestExplicitZeroBudgetFloorsMeanNone: an explicit 0 in the file is what
// it says, not the Go default (more retries than written):
// min_retries_per_second: 0 is no floor and min_concurrency: 0 none
// always allowed (the Go API's -1, as min_requests: 0 is for the SRE
// limiter), and initial_tokens: 0 is a bucket that starts empty
// (RatioConfig.StartEmpty; its InitialTokens 0 is a full bucket).
func TestExplicitZeroBudgetFloorsMeanNone(t *testing.T) {
	f := mustParse(t, `
policies:
  win:
    budget: {kind: window, min_retries_per_second: 0}
  conc:
    budget: {kind: concurrency, min_concurrency: 0}
  ratio:
    budget: {kind: ratio, initial_tokens: 0}
  preset:
    budget: {kind: ratio, preset: aws_standard_2026, initial_tokens: 0}
  both:
    budget: {kind: ratio, initial_tokens: 0, start_empty: true}
`)
	if c := f.Policies["win"].Budget.Window; c.MinRetriesPerSecond != -1 {
		t.Errorf("window: MinRetriesPerSecond %v, want -1 (no floor)", c.MinRetriesPerSecond)
	}
	if c := f.Policies["conc"].Budget.Concurrency; c.MinConcurrency != -1 {
		t.Errorf("concurrency: MinConcurrency %v, want -1 (none)", c.MinConcurrency)
	}
	for _, name := range []string{"ratio", "preset", "both"} {
		if c := f.Policies[name].Budget.Ratio; !c.StartEmpty || c.InitialTokens != 0 {
			t.Errorf("%s: StartEmpty %v, InitialTokens %v, want an empty bucket", name, c.StartEmpty, c.InitialTokens)
		}
	}
	r := NewRegistry(Options{Logger: discard, Clock: clocktest.NewFake()})
	defer r.Close()
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	fail := errors.New("boom")
	// No traffic at all: without a floor a window budget grants nothing.
	if r.Policy("win").Policy().Budget.Withdraw(fail) {
		t.Errorf("window budget with min_retries_per_second: 0 granted a retry with no traffic (the default floor is %v/s)", budget.DefaultMinRetriesPerSecond)
	}
	// Nothing in flight: with min_concurrency 0, no retry is allowed.
	if r.Policy("conc").Policy().Budget.Withdraw(fail) {
		t.Errorf("concurrency budget with min_concurrency: 0 granted a retry with nothing in flight (the default is %d)", budget.DefaultMinConcurrency)
	}
	for _, name := range []string{"ratio", "preset"} {
		if b := r.Policy(name).Policy().Budget.(*budget.Ratio); b.Available() != 0 {
			t.Errorf("%s: ratio budget with initial_tokens: 0 starts with %v tokens, not 0", name, b.Available())
		}
	}
}

// TestExplicitZeroRefusedWhereItCannotMeanWhatItSays: budget.window: 0
// is refused (it meant the 10 s default, while every other window refuses
// 0), and initial_tokens: 0 beside start_empty: false contradicts itself.
func TestExplicitZeroRefusedWhereItCannotMeanWhatItSays(t *testing.T) {
	for src, want := range map[string]string{
		"{kind: window, window: 0}":                            "policies.a.budget.window: must be positive (leave window out for the default, 10s)",
		"{kind: window, window: 0s}":                           "policies.a.budget.window: must be positive",
		"{kind: ratio, initial_tokens: 0, start_empty: false}": "policies.a.budget.initial_tokens: 0 is a bucket that starts empty, but start_empty is false",
		"{kind: window, ratio: 0}":                             "policies.a.budget.ratio: 0 is refused: write none for no share of requests (only min_retries_per_second)",
		"{kind: concurrency, ratio: 0}":                        "policies.a.budget.ratio: 0 is refused: write none for no share of requests (only min_concurrency)",
	} {
		_, err := Parse("p.yaml", []byte("policies: {a: {budget: "+src+"}}"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// TestExplicitZeroThatWouldMeanADefaultIsRefused: breaker open_timeout: 0
// was accepted and was a 60 s open period (breaker.DefaultOpenTimeout),
// backoff max: 0 a 10 s cap (backoff.DefaultMax: with base 1s the fifth
// retry waited up to 10 s), and step: 0 a step of base, none of them what
// a 0 says. Each is refused, pointing to leaving the field out for the
// default; left out, the defaults still serve.
func TestExplicitZeroThatWouldMeanADefaultIsRefused(t *testing.T) {
	for block, want := range map[string]string{
		"breaker: {kind: consecutive, failures: 1, open_timeout: 0}": "policies.p.breaker.open_timeout: 0 is refused: it must be positive (leave the field out for the default, 1m0s)",
		"backoff: {strategy: exponential, base: 1s, max: 0}":         "policies.p.backoff.max: 0 is refused: it must be positive (leave the field out for the default, 10s)",
		"backoff: {strategy: linear, base: 1s, step: 0s}":            "policies.p.backoff.step: 0 is refused: it must be positive (leave the field out for the default, base)",
	} {
		_, err := Parse("p.yaml", []byte("policies:\n  p:\n    "+block+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Parse = %v, want %q", block, err, want)
		}
	}
	f := mustParse(t, `
policies:
  p:
    breaker: {kind: consecutive, failures: 1, open_timeout: 1s}
    backoff: {strategy: linear, base: 1s, max: 2s, step: 1s}
  q:
    breaker: {kind: consecutive, failures: 1}
    backoff: {strategy: exponential, base: 1s}
`)
	if c := f.Policies["q"].Breaker.Config; c.OpenTimeout != 0 {
		t.Errorf("open_timeout left out: OpenTimeout %v, want 0 (the breaker's default)", c.OpenTimeout)
	}
	if b := f.Policies["p"].Backoff.Params; b.Max != 2*time.Second || b.Step != time.Second {
		t.Errorf("max 2s, step 1s: Params %+v", b)
	}
}
