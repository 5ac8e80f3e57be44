package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/awsretry"
)

// TestRatioBudgetFileForms (issue #32 item 8): the Ratio budget's
// StartEmpty, RetryRefill and RefundRetrySuccess have file forms, and an
// explicit value overrides a preset's.
func TestRatioBudgetFileForms(t *testing.T) {
	f := mustParse(t, `
policies:
  a: {budget: {kind: ratio, max_tokens: 10, start_empty: true, retry_refill: 0.1, refund_retry_success: true}}
  b: {budget: {kind: ratio, preset: aws_standard_2026, refund_retry_success: false}}
`)
	a := f.Policies["a"].Budget.Ratio
	if !a.StartEmpty || a.RetryRefill != 0.1 || !a.RefundRetrySuccess {
		t.Fatalf("a: %+v", a)
	}
	b := f.Policies["b"].Budget.Ratio
	want := awsretry.Standard2026()
	want.RefundRetrySuccess = false
	if b != want {
		t.Fatalf("b: %+v, want the preset with refund_retry_success false", b)
	}
	for src, msg := range map[string]string{
		"{kind: ratio, start_empty: yes}":                     `"yes" is not true or false`,
		"{kind: ratio, start_empty: true, initial_tokens: 3}": "InitialTokens",
		"{kind: ratio, retry_refill: -1}":                     "retry_refill: -1 is outside",
		"{kind: window, start_empty: true}":                   "does not apply to kind window",
	} {
		_, err := Parse("p.yaml", []byte("policies: {a: {budget: "+src+"}}"))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", src, err, msg)
		}
	}
}

// TestDurationsAreBounded (issue #32 item 8): a duration beyond
// MaxDuration is refused with a message naming the field, instead of
// overflowing deadlines downstream.
func TestDurationsAreBounded(t *testing.T) {
	for _, tc := range []struct{ src, field string }{
		{"{max_attempts: 3, hedge: {delay: 2562047h}}", "policies.a.hedge.delay"},
		{"{max_attempts: 3, hedge: {adaptive: {floor: 100000h}}}", "policies.a.hedge.adaptive.floor"},
		{"{attempt_timeout: 25h}", "policies.a.attempt_timeout"},
		{"{max_elapsed: 2562047h}", "policies.a.max_elapsed"},
		{"{backoff: {strategy: exponential, base: 1s, max: 9999999h}}", "policies.a.backoff.max"},
		{"{breaker: {kind: consecutive, failures: 2, open_timeout: 200000h}}", "policies.a.breaker.open_timeout"},
		{"{limiter: {kind: sre, window: 2562047h}}", "policies.a.limiter.window"},
		{"{budget: {kind: window, window: 2562047h}}", "policies.a.budget.window"},
	} {
		_, err := Parse("p.yaml", []byte("policies: {a: "+tc.src+"}"))
		if err == nil || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), "above the limit of 24h") {
			t.Errorf("%s: %v, want a message naming %s and the limit", tc.src, err, tc.field)
		}
	}
	if _, err := Parse("p.yaml", []byte("policies: {a: {max_elapsed: 24h}}")); err != nil {
		t.Errorf("24h itself is allowed: %v", err)
	}
}

// TestHedgeNonFatalCodes (issue #32 item 8): the hedge block names gRFC
// A6's nonFatalStatusCodes (grpcretry.WithNonFatalCodes); left out, the
// policy's retry_on.grpc_codes apply to hedged copies as to retries.
func TestHedgeNonFatalCodes(t *testing.T) {
	f := mustParse(t, `
policies:
  listed: {max_attempts: 3, hedge: {delay: 10ms, non_fatal_codes: [UNAVAILABLE, ResourceExhausted]}}
  inherits: {max_attempts: 3, retry_on: {grpc_codes: [ABORTED]}, hedge: {delay: 10ms}}
  all_fatal: {max_attempts: 3, retry_on: {grpc_codes: [ABORTED]}, hedge: {delay: 10ms, non_fatal_codes: []}}
  neither: {max_attempts: 3, hedge: {delay: 10ms}}
operations: {op: listed}
`)
	for name, want := range map[string]string{"listed": "[8 14]", "inherits": "[10]", "all_fatal": "[]", "neither": "none"} {
		codes, ok := f.Policies[name].GRPCNonFatalCodes()
		got := "none"
		if ok {
			got = fmt.Sprint(codes)
		}
		if got != want {
			t.Errorf("%s: non-fatal codes %q, want %q", name, got, want)
		}
	}
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("op")
	if !h.GRPCNonFatal(14) || h.GRPCNonFatal(10) {
		t.Fatal("Handle.GRPCNonFatal does not follow the hedge block")
	}
	if _, err := Parse("p.yaml", []byte("policies: {a: {max_attempts: 3, hedge: {delay: 1ms, non_fatal_codes: [NOPE]}}}")); err == nil || !strings.Contains(err.Error(), "hedge.non_fatal_codes[0]") {
		t.Errorf("unknown code: %v", err)
	}
}
