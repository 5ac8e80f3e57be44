package releasetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const rootPath = "github.com/stormguard/stormguard"

// repoRoot is the repository root: two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root %s has no go.work: %v", root, err)
	}
	return root
}

// workModules reads every module of go.work.
func workModules(root string) ([]*Module, error) {
	dirs, _, err := WorkUses(root)
	if err != nil {
		return nil, err
	}
	var mods []*Module
	for _, d := range dirs {
		m, err := ReadModule(root, d)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// A replace directive in a go.mod is ignored when the module is a
// dependency and makes `go install pkg@version` refuse the module, so no
// module may carry one; go.work resolves siblings in a clone.
func TestNoReplaceDirectives(t *testing.T) {
	for _, p := range replaceProblems(repoRoot(t)) {
		t.Error(p)
	}
}

func replaceProblems(root string) []string {
	mods, err := workModules(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, m := range mods {
		for _, r := range m.File.Replace {
			out = appendf(out, "%s/go.mod: replace %s => %s: remove it (go.work resolves siblings)", m.Dir, r.Old.Path, r.New.Path)
		}
		for _, e := range m.File.Exclude {
			out = appendf(out, "%s/go.mod: exclude %s %s: `go install pkg@version` refuses a module with exclude directives", m.Dir, e.Mod.Path, e.Mod.Version)
		}
	}
	return out
}

// Every module that needs a sibling must require it at the release version
// of versions.yaml: a require of v0.0.0 (or of any version that is not the
// one tagged with it) names a sibling the proxy does not have, or one whose
// API is not the one built here.
func TestSiblingRequiresAtReleaseVersion(t *testing.T) {
	for _, p := range requireProblems(repoRoot(t)) {
		t.Error(p)
	}
}

func requireProblems(root string) []string {
	v, err := ReadVersions(root)
	if err != nil {
		return []string{err.Error()}
	}
	mods, err := workModules(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	paths := map[string]bool{}
	for _, m := range mods {
		paths[m.Path] = true
	}
	for _, m := range mods {
		for _, r := range m.File.Require {
			p := r.Mod.Path
			if p != rootPath && !strings.HasPrefix(p, rootPath+"/") {
				continue
			}
			if !paths[p] {
				out = appendf(out, "%s/go.mod requires %s, which is no module of go.work", m.Dir, p)
				continue
			}
			if r.Mod.Version != v.Version {
				out = appendf(out, "%s/go.mod requires %s %s, want %s (versions.yaml; scripts/release.sh sets it)", m.Dir, p, r.Mod.Version, v.Version)
			}
		}
	}
	return out
}

// versions.yaml must name every module of go.work exactly once, as released
// or excluded, and go.work's replace block must map each module at the
// release version to its directory (so a clone never asks a proxy for a
// sibling's go.mod). A module added to go.work and forgotten here would be
// left out of the release.
func TestVersionsFileMatchesGoWork(t *testing.T) {
	for _, p := range versionsProblems(repoRoot(t)) {
		t.Error(p)
	}
}

func versionsProblems(root string) []string {
	v, err := ReadVersions(root)
	if err != nil {
		return []string{err.Error()}
	}
	dirs, wf, err := WorkUses(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	listed := map[string]int{}
	for _, d := range append(slices.Clone(v.Modules), v.Excluded...) {
		listed[d]++
	}
	for d, n := range listed {
		if n > 1 {
			out = appendf(out, "versions.yaml names %s %d times", d, n)
		}
		if !slices.Contains(dirs, d) {
			out = appendf(out, "versions.yaml names %s, which is not in go.work's use block", d)
		}
	}
	for _, d := range dirs {
		if listed[d] == 0 {
			out = appendf(out, "go.work uses %s, which versions.yaml lists neither under modules nor under excluded", d)
		}
	}
	for _, d := range v.Modules {
		if strings.HasPrefix(d, "internal/") || strings.Contains(d, "/internal/") {
			out = appendf(out, "versions.yaml releases %s, an internal module", d)
		}
	}

	want := map[string]string{} // module path -> dir
	for _, d := range dirs {
		m, err := ReadModule(root, d)
		if err != nil {
			return append(out, err.Error())
		}
		want[m.Path] = d
	}
	got := map[string]bool{}
	for _, r := range wf.Replace {
		dir, ok := want[r.Old.Path]
		switch {
		case !ok:
			out = appendf(out, "go.work replaces %s, which is no module of go.work", r.Old.Path)
		case r.Old.Version != v.Version:
			out = appendf(out, "go.work replaces %s at %q, want %s (only the release version; a replace of every version conflicts with the use block)", r.Old.Path, r.Old.Version, v.Version)
		case filepath.Clean(r.New.Path) != filepath.Clean(dir):
			out = appendf(out, "go.work replaces %s with %s, want ./%s", r.Old.Path, r.New.Path, dir)
		}
		got[r.Old.Path] = true
	}
	for p := range want {
		if !got[p] {
			out = appendf(out, "go.work has no replace of %s %s => ./%s", p, v.Version, want[p])
		}
	}
	return out
}

// layoutProblems is every check of this file on the repository at root.
func layoutProblems(root string) []string {
	return append(append(replaceProblems(root), requireProblems(root)...), versionsProblems(root)...)
}

func appendf(out []string, format string, args ...any) []string {
	return append(out, fmt.Sprintf(format, args...))
}
