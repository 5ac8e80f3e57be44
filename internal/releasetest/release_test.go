package releasetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// releaseRepo makes a git repository in a temporary directory holding what
// scripts/release.sh reads and edits, copied from the working tree: the
// script, versions.yaml, go.work and every module's go.mod and go.sum. It
// returns the repository's directory and a runner for git and the script.
func releaseRepo(t *testing.T) (string, func(wantOK bool, name string, args ...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	root := repoRoot(t)
	v, err := ReadVersions(root)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	files := []string{"scripts/release.sh", "versions.yaml", "go.work"}
	for _, d := range append(append([]string{}, v.Modules...), v.Excluded...) {
		files = append(files, filepath.Join(d, "go.mod"), filepath.Join(d, "go.sum"))
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) && strings.HasSuffix(f, "go.sum") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(repo, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(f, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(dst, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release@test.invalid",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release@test.invalid",
		"GOFLAGS=", "GOWORK=", "GOPROXY=off")
	run := func(wantOK bool, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if wantOK && err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		if !wantOK && err == nil {
			t.Fatalf("%s %s succeeded, want a refusal:\n%s", name, strings.Join(args, " "), out)
		}
		return string(out)
	}
	run(true, "git", "init", "-q", "-b", "main")
	run(true, "git", "add", "-A")
	run(true, "git", "commit", "-q", "-m", "snapshot of the working tree")
	return repo, run
}

// The dry run of the acceptance line prints a tag for every module
// of versions.yaml and the require line of every sibling in every go.mod,
// and changes nothing.
func TestReleaseDryRunPrintsTagsAndRequires(t *testing.T) {
	repo, run := releaseRepo(t)
	v, err := ReadVersions(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := run(true, "scripts/release.sh", "--dry-run", "v0.9.0")
	for _, d := range v.Modules {
		tag := "v0.9.0"
		if d != "." {
			tag = d + "/v0.9.0"
		}
		if !strings.Contains(out, "would tag    "+tag+" ") {
			t.Errorf("dry run prints no tag %s:\n%s", tag, out)
		}
	}
	for _, d := range append(append([]string{}, v.Modules...), v.Excluded...) {
		m, err := ReadModule(repo, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range m.File.Require {
			if r.Mod.Path == rootPath || strings.HasPrefix(r.Mod.Path, rootPath+"/") {
				want := "would set    " + d + "/go.mod: require " + r.Mod.Path + " " + r.Mod.Version + " -> v0.9.0"
				if !strings.Contains(out, want) {
					t.Errorf("dry run lacks %q:\n%s", want, out)
				}
			}
		}
	}
	if tags := run(true, "git", "tag", "-l"); tags != "" {
		t.Errorf("dry run created tags:\n%s", tags)
	}
	if st := run(true, "git", "status", "--porcelain"); st != "" {
		t.Errorf("dry run changed the tree:\n%s", st)
	}
}

// A real release (tests skipped: the repository here holds only go.mod
// files) edits every require, go.work and versions.yaml, commits, and tags
// every module at that commit; the next release moves them all again. The
// refusals: a dirty tree, a version not greater than the last release, a
// tag that exists, a malformed version.
func TestReleaseTagsInLockstepAndRefuses(t *testing.T) {
	repo, run := releaseRepo(t)
	v, err := ReadVersions(repo)
	if err != nil {
		t.Fatal(err)
	}

	if out := run(false, "scripts/release.sh", "--skip-tests", "0.4.0"); !strings.Contains(out, "vMAJOR.MINOR.PATCH") {
		t.Errorf("malformed version: %s", out)
	}
	if err := os.WriteFile(filepath.Join(repo, "stray.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(false, "scripts/release.sh", "--dry-run", "v0.4.0"); !strings.Contains(out, "dirty") {
		t.Errorf("dirty tree: %s", out)
	}
	if err := os.Remove(filepath.Join(repo, "stray.txt")); err != nil {
		t.Fatal(err)
	}

	for _, ver := range []string{"v0.4.0", "v0.5.0"} {
		out := run(true, "scripts/release.sh", "--skip-tests", ver)
		head := strings.TrimSpace(run(true, "git", "rev-parse", "HEAD"))
		if subj := strings.TrimSpace(run(true, "git", "log", "-1", "--format=%s")); subj != "release "+ver {
			t.Errorf("%s: last commit is %q, want the release commit", ver, subj)
		}
		for _, d := range v.Modules {
			tag := ver
			if d != "." {
				tag = d + "/" + ver
			}
			if at := strings.TrimSpace(run(true, "git", "rev-parse", tag+"^{commit}")); at != head {
				t.Errorf("%s: tag %s at %s, want the release commit %s\n%s", ver, tag, at, head, out)
			}
		}
		for _, d := range v.Excluded {
			if tags := run(true, "git", "tag", "-l", d+"/*"); tags != "" {
				t.Errorf("%s: excluded module %s was tagged: %s", ver, d, tags)
			}
		}
		got, err := ReadVersions(repo)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != ver {
			t.Errorf("versions.yaml says %s after releasing %s", got.Version, ver)
		}
		for _, p := range layoutProblems(repo) {
			t.Errorf("after releasing %s: %s", ver, p)
		}
		if st := run(true, "git", "status", "--porcelain"); st != "" {
			t.Errorf("%s: the release left the tree dirty:\n%s", ver, st)
		}
	}

	for _, ver := range []string{"v0.5.0", "v0.4.9", "v0.1.0"} {
		if out := run(false, "scripts/release.sh", "--dry-run", ver); !strings.Contains(out, "not greater than the last release v0.5.0") {
			t.Errorf("%s after v0.5.0: %s", ver, out)
		}
	}
	// A module tag ahead of the root's (a hand-made tag): the release that
	// would create it is refused, one that would not goes on.
	run(true, "git", "tag", "promretry/v0.7.0")
	if out := run(false, "scripts/release.sh", "--dry-run", "v0.7.0"); !strings.Contains(out, "tag promretry/v0.7.0 exists") {
		t.Errorf("existing tag: %s", out)
	}
	run(true, "scripts/release.sh", "--dry-run", "v0.6.0")
}

// A tag that cannot be created (here a stale ref lock on the last module's
// tag) leaves no tag of the release behind: the tags are all or none.
func TestReleaseTagFailureLeavesNoTag(t *testing.T) {
	repo, run := releaseRepo(t)
	v, err := ReadVersions(repo)
	if err != nil {
		t.Fatal(err)
	}
	last := v.Modules[len(v.Modules)-1]
	lock := filepath.Join(repo, ".git", "refs", "tags", filepath.FromSlash(last), "v0.4.0.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(false, "scripts/release.sh", "--skip-tests", "v0.4.0")
	if !strings.Contains(out, "no tag of v0.4.0 is left") {
		t.Errorf("tag failure: %s", out)
	}
	if tags := run(true, "git", "tag", "-l"); tags != "" {
		t.Errorf("tags left after a failed tagging:\n%s", tags)
	}
}
