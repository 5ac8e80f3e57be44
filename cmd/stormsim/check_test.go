package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "stormsim check" is simtest's command: a policy without a budget fails
// the 1.5× gate at 50% failures (exit 1, naming the policy, the storm and
// the margin); a shared budget passes (exit 0); a file the loader refuses
// exits 2 with its line.
func TestCheckSubcommand(t *testing.T) {
	fullModel(t)
	for _, c := range []struct {
		file string
		code int
		want string
	}{
		{"../../simtest/testdata/nobudget.yaml", 1, ": FAIL nobudget failed errors-50: peak amplification"},
		{"../../simtest/testdata/budgeted.yaml", 0, "PASS"},
		{"testdata/does-not-exist.yaml", 2, "does-not-exist.yaml"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"check", "--storms", "errors-50", "--max-amplification", "1.5", c.file}, &out, &errOut, false)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.want) {
			t.Errorf("%s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", c.file, code, c.code, c.want, &out, &errOut)
		}
	}
}

// TestCheckSimulatesNoneSpellings: "stormsim check" reads the policy
// file's spellings of the Go API's "none" values (config's
// max_retry_after: ignore, ratio: none, none or 0 for the floors,
// initial_tokens: 0) and simulates them: a concurrency budget with no
// share and no floor grants no retry, so its calls make one attempt each.
func TestCheckSimulatesNoneSpellings(t *testing.T) {
	fullModel(t)
	path := filepath.Join(t.TempDir(), "none.yaml")
	if err := os.WriteFile(path, []byte(`policies:
  ignore:
    max_attempts: 3
    max_retry_after: ignore
    backoff: {strategy: constant}
    budget: {kind: window, ratio: none, min_retries_per_second: 2}
  noretry:
    max_attempts: 3
    budget: {kind: concurrency, ratio: none, min_concurrency: none}
  floorless:
    max_attempts: 3
    budget: {kind: window, ratio: 0.1, min_retries_per_second: 0}
  empty:
    max_attempts: 3
    budget: {kind: ratio, initial_tokens: 0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", "--storms", "errors-50", path}, &out, &errOut, false)
	if code == 2 {
		t.Fatalf("exit 2: the file was refused\nstdout:\n%s\nstderr:\n%s", &out, &errOut)
	}
	for _, name := range []string{"ignore", "noretry", "floorless", "empty"} {
		if !strings.Contains(out.String(), "PASS "+name+"\n") && !strings.Contains(out.String(), "FAIL "+name+"\n") {
			t.Errorf("no verdict for %s\nstdout:\n%s", name, &out)
		}
	}
	_, section, _ := strings.Cut(out.String(), "\nnoretry\n")
	section, _, _ = strings.Cut(section, "\n\n")
	if !strings.Contains(section, ": 1.00 attempts per call") {
		t.Errorf("noretry (no share, no floor) retried:\n%s", section)
	}
}
