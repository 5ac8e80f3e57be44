package simtest_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/simtest"
)

// The command as a CI job runs it: a binary built from
// internal/checkcmd (a main calling simtest.Main), its exit status and
// its messages.
func TestBinary(t *testing.T) {
	fullModel(t)
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "check")
	build := exec.Command("go", "build", "-o", bin, "./internal/checkcmd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"pass", []string{"--storms", "errors-50", "--max-amplification", "1.5", "testdata/budgeted.yaml"}, simtest.ExitPass, "every gate kept"},
		{"gate failed", []string{"--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml"}, simtest.ExitFail,
			": FAIL nobudget failed errors-50: peak amplification"},
		{"loader's message", []string{"testdata/nosuch.yaml"}, simtest.ExitUsage, "testdata/nosuch.yaml:1:1: cannot be read: no such file or directory"},
		{"usage", []string{"--bogus"}, simtest.ExitUsage, "usage: stormsim check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			var stderr limitedBuffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, stderr.String())
			}
			mustContain(t, "stderr", stderr.String(), c.want)
		})
	}
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
