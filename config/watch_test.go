package config

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// watched starts Watch on path and returns the registry and a channel of
// reload results.
func watched(t *testing.T, path string) (*Registry, <-chan error) {
	t.Helper()
	results := make(chan error, 16)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	w, err := r.Watch(path, WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := next(t, results); err != nil {
		t.Fatal(err)
	}
	return r, results
}

// next waits for the next reload result (bounded, so a lost event fails
// the test instead of hanging it).
func next(t *testing.T, results <-chan error) error {
	t.Helper()
	select {
	case err := <-results:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
		return nil
	}
}

func attemptsFile(n int) []byte {
	return []byte("policies: {api: {max_attempts: " + string(rune('0'+n)) + "}}\n")
}

func TestWatchRenameOnSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	r, results := watched(t, path)
	h := r.Policy("api")
	if h.Policy().MaxAttempts != 2 {
		t.Fatal("initial load")
	}
	// An editor writes a temporary file and renames it over the original.
	save := func(data []byte) {
		tmp := filepath.Join(dir, ".policies.yaml.swp")
		os.WriteFile(tmp, data, 0o644)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	save(attemptsFile(5))
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	// An invalid save keeps the old policy and is reported.
	save([]byte("policies: {api: {max_attempts: lots}}\n"))
	if err := next(t, results); err == nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("invalid file: err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	// A later valid save is picked up; the watch survived the renames.
	save(attemptsFile(7))
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 7 {
		t.Fatalf("err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	// In-place writes work too.
	os.WriteFile(path, attemptsFile(8), 0o644)
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 8 {
		t.Fatalf("err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
}

// TestWatchConfigMapSymlinkSwap reproduces a Kubernetes ConfigMap volume:
// dir/policies.yaml -> ..data/policies.yaml, ..data -> ..2026_v1; an update
// writes ..2026_v2 and swaps ..data atomically by renaming a new symlink.
func TestWatchConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, data []byte) {
		os.Mkdir(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "policies.yaml"), data, 0o644)
	}
	swap := func(target string) {
		tmp := filepath.Join(dir, "..data_tmp")
		os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_v1", attemptsFile(3))
	swap("..2026_v1")
	path := filepath.Join(dir, "policies.yaml")
	if err := os.Symlink(filepath.Join("..data", "policies.yaml"), path); err != nil {
		t.Fatal(err)
	}
	r, results := watched(t, path)
	h := r.Policy("api")
	if h.Policy().MaxAttempts != 3 {
		t.Fatal("initial load")
	}
	version("..2026_v2", attemptsFile(6))
	swap("..2026_v2")
	os.RemoveAll(filepath.Join(dir, "..2026_v1"))
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 6 {
		t.Fatalf("err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
}

func TestWatchRefusesBadFirstFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(path, []byte("policies: 3\n"), 0o644)
	r := NewRegistry(Options{Logger: discard})
	if w, err := r.Watch(path, WatchOptions{}); err == nil || w != nil {
		w.Close()
		t.Fatal("Watch accepted an invalid first file")
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// expect waits for the next reload and checks that it applied n attempts.
func expect(t *testing.T, what string, results <-chan error, h *Handle, n int) {
	t.Helper()
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != n {
		t.Fatalf("%s: err=%v attempts=%d, want %d", what, err, h.Policy().MaxAttempts, n)
	}
}

// TestWatchFollowsLinkIntoSharedDir (issue #18 item 11): the watched path
// is a symlink to a file in another directory (a shared mount). Edits of
// the target, in place or by rename-on-save, happen in that directory and
// must reload.
func TestWatchFollowsLinkIntoSharedDir(t *testing.T) {
	base := t.TempDir()
	shared, app := filepath.Join(base, "shared"), filepath.Join(base, "app")
	mkdirs(t, shared, app)
	target := filepath.Join(shared, "policies.yaml")
	os.WriteFile(target, attemptsFile(2), 0o644)
	path := filepath.Join(app, "policies.yaml")
	symlink(t, target, path)
	r, results := watched(t, path)
	h := r.Policy("api")
	if h.Policy().MaxAttempts != 2 {
		t.Fatal("initial load")
	}
	if err := os.WriteFile(target, attemptsFile(5), 0o644); err != nil { // in place
		t.Fatal(err)
	}
	expect(t, "in-place edit of the target", results, h, 5)
	writeFile(t, target, string(attemptsFile(6))) // rename-on-save beside the target
	expect(t, "rename-on-save of the target", results, h, 6)
}

// TestWatchFollowsRepointedReleaseLink (issue #18 item 11): path links
// through a release "current" symlink (app/policies.yaml ->
// ../releases/current/policies.yaml, current -> v1). An in-place edit of
// the release's file must reload; so must re-pointing current to a new
// release, after which edits of the new release (not the old) count.
func TestWatchFollowsRepointedReleaseLink(t *testing.T) {
	base := t.TempDir()
	releases, app := filepath.Join(base, "releases"), filepath.Join(base, "app")
	mkdirs(t, filepath.Join(releases, "v1"), filepath.Join(releases, "v2"), app)
	v1, v2 := filepath.Join(releases, "v1", "policies.yaml"), filepath.Join(releases, "v2", "policies.yaml")
	os.WriteFile(v1, attemptsFile(3), 0o644)
	symlink(t, "v1", filepath.Join(releases, "current"))
	path := filepath.Join(app, "policies.yaml")
	symlink(t, filepath.Join("..", "releases", "current", "policies.yaml"), path)
	r, results := watched(t, path)
	h := r.Policy("api")
	if h.Policy().MaxAttempts != 3 {
		t.Fatal("initial load")
	}
	if err := os.WriteFile(v1, attemptsFile(4), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, "in-place edit of the release", results, h, 4)

	// Deploy v2: re-point current atomically (a new link renamed over it).
	os.WriteFile(v2, attemptsFile(6), 0o644)
	symlink(t, "v2", filepath.Join(releases, "current.new"))
	if err := os.Rename(filepath.Join(releases, "current.new"), filepath.Join(releases, "current")); err != nil {
		t.Fatal(err)
	}
	expect(t, "re-pointed current", results, h, 6)
	if err := os.WriteFile(v2, attemptsFile(7), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, "in-place edit of the new release", results, h, 7)
}

// TestWatchDirs checks the directories Watch follows for a chain of links.
func TestWatchDirs(t *testing.T) {
	base := t.TempDir()
	mkdirs(t, filepath.Join(base, "releases", "v1"), filepath.Join(base, "app"), filepath.Join(base, "k8s", "..2026_v1"))
	os.WriteFile(filepath.Join(base, "releases", "v1", "p.yaml"), nil, 0o644)
	os.WriteFile(filepath.Join(base, "k8s", "..2026_v1", "p.yaml"), nil, 0o644)
	symlink(t, "v1", filepath.Join(base, "releases", "current"))
	symlink(t, filepath.Join(base, "releases", "current", "p.yaml"), filepath.Join(base, "app", "p.yaml"))
	symlink(t, "..2026_v1", filepath.Join(base, "k8s", "..data"))
	symlink(t, "..data/p.yaml", filepath.Join(base, "k8s", "p.yaml"))
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"releases/v1/p.yaml", []string{"releases/v1"}},
		{"app/p.yaml", []string{"app", "releases", "releases/v1"}},
		{"app/../app/./p.yaml", []string{"app", "releases", "releases/v1"}},
		{"k8s/p.yaml", []string{"k8s", "k8s/..2026_v1"}},
		{"app/missing.yaml", []string{"app"}},
		{"releases/current/missing.yaml", []string{"releases", "releases/current", "releases/v1"}},
	} {
		var got []string
		dirs, _ := watchDirs(filepath.Join(base, tc.path))
		for d := range dirs {
			rel, _ := filepath.Rel(base, d)
			got = append(got, filepath.ToSlash(rel))
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("watchDirs(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
