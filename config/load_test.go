package config

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestLoadExample(t *testing.T) {
	f, err := Load("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Version) != 12 || f.Default != "default" {
		t.Fatalf("version %q default %q", f.Version, f.Default)
	}
	p := f.Policies["payments"]
	if p.MaxAttempts != 4 || p.AttemptTimeout != 2*time.Second || p.MaxElapsed != 10*time.Second || p.MaxRetryAfter != 20*time.Second {
		t.Fatalf("payments %+v", p)
	}
	if p.Backoff.Strategy != "decorrelated_jitter" || p.Backoff.Params.Base != 50*time.Millisecond || p.Backoff.Params.Max != 5*time.Second {
		t.Fatalf("backoff %+v", p.Backoff)
	}
	if got := p.RetryOn.GRPCCodes; len(got) != 2 || got[0] != "UNAVAILABLE" || got[1] != "RESOURCE_EXHAUSTED" {
		t.Fatalf("grpc codes %v", got)
	}
	if p.Budget.Kind != "ratio" || p.Budget.Ratio.Refill != 0.1 {
		t.Fatalf("budget %+v", p.Budget)
	}
	w := p.Breaker.Config.Window
	if p.Breaker.Kind != "time_window" || w.Duration != time.Minute || w.MinCalls != 20 || w.FailureRatio != 0.3 || w.Buckets != 10 {
		t.Fatalf("breaker %+v", p.Breaker)
	}
	if tel := f.Policies["telemetry"]; tel.Backoff.Params.Jitter != backoff.Equal || tel.Budget.Window.Ratio != 0.2 || tel.Breaker.Config.ConsecutiveFailures != 5 {
		t.Fatalf("telemetry %+v", tel)
	}
	if f.Operations["refund"] != "payments" || f.Operations["export-spans"] != "telemetry" {
		t.Fatalf("operations %v", f.Operations)
	}
}

func TestJSONIsAccepted(t *testing.T) {
	f, err := Parse("p.json", []byte(`{"policies": {"api": {"max_attempts": 2, "backoff": {"strategy": "constant", "base": "10ms"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Policies["api"]; s.MaxAttempts != 2 || s.Backoff.Strategy != "constant" {
		t.Fatalf("%+v", s)
	}
}

// TestBrokenFiles compares the messages for each broken file with its
// golden file (go test -run BrokenFiles -update rewrites them).
func TestBrokenFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/broken/*")
	var n int
	for _, path := range files {
		if strings.HasSuffix(path, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := Load(path)
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("Load(%s) = %v, want a *config.Error", path, err)
			}
			golden := path + ".golden"
			got := err.Error() + "\n"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, _ := os.ReadFile(golden)
			if got != string(want) {
				t.Errorf("messages differ from %s:\ngot:\n%swant:\n%s", golden, got, want)
			}
		})
	}
	if n < 12 {
		t.Fatalf("only %d broken files", n)
	}
}

// FuzzParse feeds the decoder arbitrary files, seeded with the example,
// every broken file and the keys of issue #17 (ratio, failure_ratio,
// slow_call_ratio, max_attempts: unlimited, and the old names refused).
// A file is either valid (at least one policy, max_attempts in range, and
// it builds and applies) or refused with problems that each name the file.
func FuzzParse(f *testing.F) {
	for _, p := range append(must(filepath.Glob("testdata/*.yaml")), must(filepath.Glob("testdata/broken/*"))...) {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	for _, seed := range []string{
		"policies: {a: {budget: {kind: window, window: 10s, ratio: 0.2, buckets: 10}}}",
		"policies: {a: {budget: {kind: concurrency, ratio: 0.1, min_concurrency: 2}}}",
		"policies: {a: {breaker: {kind: time_window, window: 1m, failure_ratio: 0.5, slow_call_duration: 1s, slow_call_ratio: 0.9}}}",
		"policies: {a: {breaker: {kind: count_window, calls: 20, failure_ratio: 1, slow_call_ratio: 0.5}}}",
		"policies: {a: {max_attempts: unlimited, max_elapsed: 30s}}",
		"policies: {a: {max_retry_after: ignore, budget: {kind: window, window: 5s, ratio: none, min_retries_per_second: none}}}",
		"policies: {a: {budget: {kind: concurrency, ratio: none, min_concurrency: 0}}, b: {budget: {kind: ratio, initial_tokens: 0}}}",
		"policies: {a: {backoff: {strategy: constant}, breaker: {kind: count_window, calls: 1000, per: host, max_keys: 1000}}}",
		"policies: {a: {budget: {kind: window, percent: 0.2}, breaker: {kind: count_window, calls: 5, failure_rate: 0.5, slow_call_rate: 0.5}}}",
		"policies: {a: {max_attempts: 0}}",
		"policies: {a: {nested: ignore}}",
		"policies: {a: {nested: {rule: budget, budget: {kind: ratio, preset: ten_percent}}}}",
		"policies: {a: {nested: {rule: one_layer, budget: {kind: concurrency}}}}",
		"policies: {}\noperations: {}\n",
		"policies: {a: {limiter: {kind: sre, k: 1.1, window: 30s, buckets: 30, max_rejection: 0.8, min_requests: 0}}}",
		"policies: {a: {limiter: {kind: sre, window: 10ms, buckets: 1000}}}",
		"policies: {a: {limiter: {kind: aws_adaptive, beta: 0.5, scale_constant: 0.4, smoothing: 1, min_fill_rate: 0.1}}}",
		"policies: {a: {limiter: {kind: aws-adaptive, k: 2}}}",
		"policies: {a: {preset: aws_standard_2026}, b: {preset: aws_standard_2026_dynamodb, max_attempts: 2}, c: {preset: aws_standard_legacy, backoff: {strategy: constant, base: 1s}}}",
		"policies: {a: {budget: {kind: ratio, preset: aws_standard_2026, throttle_cost: 1}}, b: {budget: {kind: ratio, preset: aws-2026}}}",
		"policies: {a: {hedge: {delay: 50ms, max_hedges: 1, adaptive: {percentile: 0.95, window: 10s, floor: 5ms, max: 1s, min_samples: 20}}}}",
		"policies: {a: {max_attempts: 5, hedge: {adaptive: {}, max_hedges: 4}}}",
		"policies: {a: {max_attempts: 1, hedge: {delay: 0s}}}",
		"policies: {a: {max_attempts: unlimited, hedge: {delay: 1ms, max_hedges: 100}}, b: {hedge: {delay: 10ms}, limiter: {kind: sre}}}",
		"policies: {a: {hedge: {delay: -1ms, adaptive: {floor: 10ms, max: 5ms, percentile: 0}}}}",
		`{"policies": {"a": {"max_attempts": "unlimited", "breaker": {"kind": "count_window", "calls": 3, "failure_ratio": 0.5}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err == nil {
			if file == nil || len(file.Policies) == 0 {
				t.Fatal("nil error without policies")
			}
			for name, p := range file.Policies {
				if p.MaxAttempts != retry.Unlimited && (p.MaxAttempts < 1 || p.MaxAttempts > 1000) {
					t.Fatalf("policy %s: max_attempts %d accepted", name, p.MaxAttempts)
				}
				if h := p.Hedge; h != nil {
					if h.MaxHedges < 1 || p.MaxAttempts != retry.Unlimited && h.MaxHedges > p.MaxAttempts-1 {
						t.Fatalf("policy %s: max_hedges %d accepted with max_attempts %d", name, h.MaxHedges, p.MaxAttempts)
					}
					if h.Delay < 0 || h.Delay == 0 && h.Adaptive == nil {
						t.Fatalf("policy %s: hedge delay %v accepted without adaptive", name, h.Delay)
					}
					if p.Limiter != nil {
						t.Fatalf("policy %s: hedge accepted with a limiter", name)
					}
				}
			}
			if err := NewRegistry(Options{Logger: discard}).Apply(file); err != nil { // a valid file must build
				t.Fatalf("a valid file was not applied: %v", err)
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 || file != nil {
			t.Fatalf("error %v is not a *config.Error with problems", err)
		}
		for _, p := range ce.Problems {
			if p.File != "fuzz.yaml" || p.Msg == "" {
				t.Fatalf("problem %+v does not say where and what", p)
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRatioKeys (issue #17): shares are fractions whose key says so. The
// new keys fill the Go fields of the same names; the old ones are refused
// with their line, the new name and the unit.
func TestRatioKeys(t *testing.T) {
	f, err := Parse("p.yaml", []byte(`
policies:
  api:
    budget: {kind: window, window: 10s, ratio: 0.2}
    breaker: {kind: time_window, window: 60s, failure_ratio: 0.5, slow_call_duration: 2s, slow_call_ratio: 0.8}
  batch:
    budget: {kind: concurrency, ratio: 0.1}
    breaker: {kind: count_window, calls: 50, failure_ratio: 0.25}
`))
	if err != nil {
		t.Fatal(err)
	}
	api, batch := f.Policies["api"], f.Policies["batch"]
	if api.Budget.Window.Ratio != 0.2 || batch.Budget.Concurrency.Ratio != 0.1 {
		t.Fatalf("budget ratios: window %+v, concurrency %+v", api.Budget.Window, batch.Budget.Concurrency)
	}
	if w := api.Breaker.Config.Window; w.FailureRatio != 0.5 || w.SlowCallRatio != 0.8 || batch.Breaker.Config.Window.FailureRatio != 0.25 {
		t.Fatalf("breaker ratios: %+v, %+v", w, batch.Breaker.Config.Window)
	}

	for _, tc := range []struct{ src, want string }{
		{"policies:\n  api:\n    budget: {kind: window, percent: 0.2}\n",
			"p.yaml:3: policies.api.budget.percent: renamed to ratio, a fraction from 0 to 1"},
		{"policies:\n  api:\n    budget:\n      kind: concurrency\n      percent: 20\n",
			"p.yaml:5: policies.api.budget.percent: renamed to ratio, a fraction from 0 to 1"},
		{"policies:\n  api:\n    breaker: {kind: count_window, calls: 9, failure_rate: 0.5}\n",
			"p.yaml:3: policies.api.breaker.failure_rate: renamed to failure_ratio, a fraction from 0 to 1"},
		{"policies:\n  api:\n    breaker:\n      kind: time_window\n      window: 1m\n      slow_call_duration: 1s\n      slow_call_rate: 0.5\n",
			"p.yaml:7: policies.api.breaker.slow_call_rate: renamed to slow_call_ratio, a fraction from 0 to 1"},
	} {
		_, err := Parse("p.yaml", []byte(tc.src))
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Error() != tc.want {
			t.Errorf("%q: got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestMaxAttemptsDefaultAndUnlimited (issue #17): a policy that leaves
// max_attempts out gets retry.DefaultMaxAttempts; no count limit must be
// spelled "unlimited"; 0, which used to mean that, is refused.
func TestMaxAttemptsDefaultAndUnlimited(t *testing.T) {
	f, err := Parse("p.yaml", []byte(`
policies:
  plain: {backoff: {strategy: constant, base: 0}}
  forever: {max_attempts: unlimited, max_elapsed: 1m, backoff: {strategy: constant, base: 0}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Policies["plain"].MaxAttempts; got != retry.DefaultMaxAttempts {
		t.Fatalf("omitted max_attempts: spec %d, want %d", got, retry.DefaultMaxAttempts)
	}
	if got := f.Policies["forever"].MaxAttempts; got != retry.Unlimited {
		t.Fatalf("unlimited: spec %d, want retry.Unlimited", got)
	}
	r := NewRegistry(Options{Logger: discard})
	r.Apply(f)
	attempts := func(name string, failures int) int {
		n := 0
		retry.Run(context.Background(), r.Policy(name).Policy(), func(context.Context) error {
			if n++; n <= failures {
				return errors.New("unavailable")
			}
			return nil
		})
		return n
	}
	if p := r.Policy("plain").Policy(); p.MaxAttempts != retry.DefaultMaxAttempts {
		t.Fatalf("plain policy MaxAttempts = %d", p.MaxAttempts)
	}
	if n := attempts("plain", 100); n != retry.DefaultMaxAttempts {
		t.Fatalf("plain: %d attempts against a failing op, want %d", n, retry.DefaultMaxAttempts)
	}
	if n := attempts("forever", 20); n != 21 {
		t.Fatalf("unlimited: %d attempts, want 21 (20 failures, then success)", n)
	}
	for _, src := range []string{"policies: {api: {max_attempts: 0}}", `{"policies": {"api": {"max_attempts": 0}}}`} {
		_, err := Parse("p.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "p.yaml:1: policies.api.max_attempts: 0 is not a limit") {
			t.Errorf("%s: got %v, want 0 refused", src, err)
		}
	}
	if f, err := Parse("p.json", []byte(`{"policies": {"api": {"max_attempts": "unlimited"}}}`)); err != nil || f.Policies["api"].MaxAttempts != retry.Unlimited {
		t.Fatalf("JSON unlimited: %v", err)
	}
}
