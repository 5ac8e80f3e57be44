package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
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

func FuzzParse(f *testing.F) {
	for _, p := range append(must(filepath.Glob("testdata/*.yaml")), must(filepath.Glob("testdata/broken/*"))...) {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err == nil {
			if file == nil || len(file.Policies) == 0 {
				t.Fatal("nil error without policies")
			}
			NewRegistry(Options{Logger: discard}).Apply(file) // a valid file must build
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 || file != nil {
			t.Fatalf("error %v is not a *config.Error with problems", err)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
