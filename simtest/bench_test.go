package simtest_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// BenchmarkMainReadmeExample is stormsim check on the root README's
// example policy file: the whole suite (five storms) with the default
// downstream, and with testdata/downstream.yaml.
func BenchmarkMainReadmeExample(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"default", []string{"testdata/policies.yaml"}},
		{"downstream.yaml", []string{"--downstream", "testdata/downstream.yaml", "testdata/policies.yaml"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if code := simtest.Main(c.args, io.Discard, io.Discard); code == simtest.ExitUsage {
					b.Fatal("exit 2")
				}
			}
		})
	}
}

// BenchmarkCheckTypicalFile and BenchmarkCheck40Policies are the issue's
// speed targets (a typical file of up to 5 policies under 3 s, 40
// policies under 20 s, trials included, on the 2-core machine): every
// storm, DefaultTrials trials.
func BenchmarkCheckTypicalFile(b *testing.B) { benchPolicies(b, 5) }

func BenchmarkCheck40Policies(b *testing.B) { benchPolicies(b, 40) }

func benchPolicies(b *testing.B, n int) {
	var sb strings.Builder
	sb.WriteString("policies:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  p%d:\n    max_attempts: %d\n    attempt_timeout: 1s\n    backoff: {strategy: full_jitter, base: 50ms, max: 2s}\n    budget: {kind: ratio, preset: ten_percent}\n", i, 2+i%3)
	}
	path := filepath.Join(b.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if code := simtest.Main([]string{path}, io.Discard, io.Discard); code == simtest.ExitUsage {
			b.Fatal("exit 2")
		}
	}
}
