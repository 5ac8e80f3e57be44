package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// watched starts Watch on path and returns the registry and a channel of
// reload results.
func watched(t *testing.T, path string) (*Registry, <-chan error) {
	t.Helper()
	results := make(chan error, 16)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx, path, WatchOptions{Debounce: 20 * time.Millisecond}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Watch returned %v", err)
		}
	})
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
	if err := r.Watch(context.Background(), path, WatchOptions{}); err == nil {
		t.Fatal("Watch accepted an invalid first file")
	}
}
