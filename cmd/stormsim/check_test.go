package main

import (
	"bytes"
	"context"
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
