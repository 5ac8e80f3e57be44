package releasetest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// findAPIDiff returns the apidiff binary `make apicheck` installs, or skips
// the test without it (and fails instead under CI=true, as the repository's
// other tool-dependent tests do).
func findAPIDiff(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("APIDIFF"); p != "" {
		return p
	}
	if p, err := exec.LookPath("apidiff"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "apidiff")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("apidiff is not installed (make tools installs it)")
	}
	t.Skip("apidiff is not installed (make tools installs it)")
	return ""
}

// scripts/apicheck.sh on a one-module repository: with no tag it says so
// and exits 0; after a tag, a removed function and a changed signature are
// printed as incompatible, an added function is not, the exit status is 0,
// and 1 with --strict.
func TestAPICheckPrintsBreakingChanges(t *testing.T) {
	apidiff := findAPIDiff(t)
	root := repoRoot(t)
	repo := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "apicheck.sh"))
	if err != nil {
		t.Fatal(err)
	}
	write("scripts/apicheck.sh", string(script))
	write("versions.yaml", "version: v0.1.0\nmodules:\n  - .\nexcluded:\n")
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("m.go", "// Package m is a test module.\npackage m\n\n// A is removed later.\nfunc A() {}\n\n// B changes.\nfunc B(int) {}\n")
	env := append(os.Environ(), "APIDIFF="+apidiff, "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@test.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@test.invalid")
	run := func(name string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(out), 0
	}
	run("git", "init", "-q")
	run("git", "add", "-A")
	run("git", "commit", "-q", "-m", "v0.1.0")

	out, code := run("scripts/apicheck.sh")
	if code != 0 || !strings.Contains(out, "no previous release tag") {
		t.Errorf("no tag: exit %d, want 0 and 'no previous release tag':\n%s", code, out)
	}

	run("git", "tag", "v0.1.0")
	write("m.go", "// Package m is a test module.\npackage m\n\n// B changes.\nfunc B(string) {}\n\n// C is new.\nfunc C() {}\n")
	out, code = run("scripts/apicheck.sh")
	if code != 0 {
		t.Errorf("breaking change without --strict: exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"against v0.1.0", "A: removed", "B: changed from func(int) to func(string)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "C:") {
		t.Errorf("an added function is reported as incompatible:\n%s", out)
	}
	if _, code := run("scripts/apicheck.sh", "--strict"); code != 1 {
		t.Errorf("--strict with a breaking change: exit %d, want 1", code)
	}
}
