package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// TestGoNoneValuesHaveFileForms: the Go settings whose negative value
// means "none" have file spellings: max_retry_after: ignore
// (MaxRetryAfter < 0: ignore server advice), ratio: none (WindowConfig
// and ConcurrencyConfig.Ratio < 0: only the floor), and none (or 0) for
// the floors min_retries_per_second and min_concurrency.
func TestGoNoneValuesHaveFileForms(t *testing.T) {
	f := mustParse(t, `
policies:
  ignore: {max_retry_after: ignore}
  win: {budget: {kind: window, ratio: none, min_retries_per_second: none}}
  winfloor: {budget: {kind: window, ratio: none, min_retries_per_second: 2}}
  conc: {budget: {kind: concurrency, ratio: none, min_concurrency: none}}
`)
	if d := f.Policies["ignore"].MaxRetryAfter; d >= 0 {
		t.Errorf("max_retry_after: ignore is %v, want negative", d)
	}
	if c := f.Policies["win"].Budget.Window; c.Ratio != -1 || c.MinRetriesPerSecond != -1 {
		t.Errorf("window: %+v, want Ratio -1 and MinRetriesPerSecond -1", c)
	}
	if c := f.Policies["winfloor"].Budget.Window; c.Ratio != -1 || c.MinRetriesPerSecond != 2 {
		t.Errorf("window with a floor: %+v", c)
	}
	if c := f.Policies["conc"].Budget.Concurrency; c.Ratio != -1 || c.MinConcurrency != -1 {
		t.Errorf("concurrency: %+v, want Ratio -1 and MinConcurrency -1", c)
	}
	for src, want := range map[string]string{
		"{max_retry_after: none}":                               "none could mean no cap or no advice: write ignore",
		"{max_retry_after: -1s}":                                `"-1s" must not be negative (write ignore to ignore server advice)`,
		"{budget: {kind: window, ratio: -1}}":                   `policies.a.budget.ratio: "-1" must not be negative (write none for none)`,
		"{budget: {kind: window, min_retries_per_second: -1}}":  `policies.a.budget.min_retries_per_second: "-1" must not be negative`,
		"{budget: {kind: concurrency, min_concurrency: -3}}":    `policies.a.budget.min_concurrency: "-3" must not be negative`,
		"{budget: {kind: concurrency, min_concurrency: nope}}":  `"nope" is not a whole number`,
		"{budget: {kind: window, min_retries_per_second: [1]}}": "must be a value, not a list",
	} {
		_, err := Parse("p.yaml", []byte("policies: {a: "+src+"}"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// TestMaxRetryAfterIgnoreRetriesPastAdvice: with max_retry_after: ignore
// the built policy ignores advice beyond any cap and retries on its own
// backoff; with the default cap the same advice stops the call.
func TestMaxRetryAfterIgnoreRetriesPastAdvice(t *testing.T) {
	f := mustParse(t, `
policies:
  ignore: {max_attempts: 2, max_retry_after: ignore, backoff: {strategy: constant, base: 0}}
  capped: {max_attempts: 2, backoff: {strategy: constant, base: 0}}
`)
	r := NewRegistry(Options{Logger: discard})
	defer r.Close()
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"ignore": 2, "capped": 1} {
		calls := 0
		err := retry.Run(context.Background(), r.Policy(name).Policy(), func(context.Context) error {
			calls++
			return retry.After(errors.New("busy"), time.Hour)
		})
		if calls != want {
			t.Errorf("%s: %d attempts (%v), want %d", name, calls, err, want)
		}
		if name == "capped" && !errors.Is(err, retry.ErrAdviceExceedsCap) {
			t.Errorf("capped: %v, want ErrAdviceExceedsCap", err)
		}
	}
}
