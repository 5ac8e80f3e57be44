package config

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// writeUntil replaces name every 2ms, alternating two contents, until
// stop is closed or 10s have passed (a bound, so that a broken watch fails
// the test instead of hanging it). It returns a function that stops it and
// reports whether it was stopped before the bound.
func writeUntil(t *testing.T, name string, contents ...[]byte) (stop func() (early bool)) {
	t.Helper()
	done, quit := make(chan bool, 1), make(chan struct{})
	go func() {
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-quit:
				done <- true
				return
			case <-deadline:
				done <- false
				return
			case <-tick.C:
				// Atomically (rename-on-save), so a reload never reads a
				// half-written file.
				tmp := name + ".tmp"
				os.WriteFile(tmp, contents[i%len(contents)], 0o644)
				os.Rename(tmp, name)
			}
		}
	}()
	var once sync.Once
	var early bool
	stop = func() bool {
		once.Do(func() { close(quit); early = <-done })
		return early
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestBusySiblingDoesNotPostponeReload (issue #32 item 4): a file beside
// the policy file, written every few ms, must not postpone a reload: only
// events of the policy file (and its symlink chain) re-arm the debounce.
// MaxDelay is an hour here, so only that rule can let the reload through
// while the sibling is busy.
func TestBusySiblingDoesNotPostponeReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	results := make(chan error, 64)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	w, err := r.Watch(path, WatchOptions{Debounce: 200 * time.Millisecond, MaxDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-results
	h := r.Policy("api")
	stop := writeUntil(t, filepath.Join(dir, "app.log"), []byte("a"), []byte("b"))
	os.WriteFile(path, attemptsFile(5), 0o644)
	err = next(t, results)
	if !stop() {
		t.Fatal("the reload came only after the sibling's writes stopped (10s)")
	}
	if err != nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("err=%v attempts=%d, want 5", err, h.Policy().MaxAttempts)
	}
}

// TestBusyPolicyFileReloadsWithinMaxDelay (issue #32 item 4): a policy
// file rewritten every few ms (a tool stuck in a loop) must still be
// reloaded: the debounce has a maximum delay.
func TestBusyPolicyFileReloadsWithinMaxDelay(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	results := make(chan error, 64)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	w, err := r.Watch(path, WatchOptions{Debounce: 200 * time.Millisecond, MaxDelay: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-results
	h := r.Policy("api")
	stop := writeUntil(t, path, attemptsFile(5), attemptsFile(6))
	err = next(t, results)
	if !stop() {
		t.Fatal("the reload came only after the writes stopped (10s): the debounce has no maximum delay")
	}
	if n := h.Policy().MaxAttempts; err != nil || (n != 5 && n != 6) {
		t.Fatalf("err=%v attempts=%d, want 5 or 6", err, n)
	}
}

// TestWatchRecreatedDirectory (issue #32 item 5): when the policy file's
// directory is deleted and made again, its inotify watch is gone. Watch
// must report the lost watch (a watch error, ErrWatchLost) while it is
// gone, watch the new directory once it is back, and reload from it.
func TestWatchRecreatedDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "conf")
	mkdirs(t, dir)
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	results := make(chan error, 1024)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	w, err := r.Watch(path, WatchOptions{Debounce: 10 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-results
	h := r.Policy("api")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for {
		err := next(t, results)
		if errors.Is(err, ErrWatchLost) && ReloadResult(err) == ResultWatchError {
			break
		}
		if err == nil {
			t.Fatal("a reload succeeded with the directory gone")
		}
	}
	if r.WatchErrors() == 0 {
		t.Fatal("the lost watch is not counted as a watch error")
	}
	mkdirs(t, dir)
	os.WriteFile(path, attemptsFile(4), 0o644)
	for {
		err := next(t, results)
		if err == nil {
			break
		}
	}
	if n := h.Policy().MaxAttempts; n != 4 {
		t.Fatalf("after the directory came back: %d attempts, want 4", n)
	}
	// The new directory is watched: an edit in place reloads.
	os.WriteFile(path, attemptsFile(6), 0o644)
	expect(t, "edit in the recreated directory", results, h, 6)
}

// TestWatchReportsDeletedPolicyFile (issue #32 item 5): a policy file
// that stays deleted is reported (a failure: the old policies serve on),
// and reloaded once it is back.
func TestWatchReportsDeletedPolicyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	results := make(chan error, 1024)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	w, err := r.Watch(path, WatchOptions{Debounce: 10 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-results
	h := r.Policy("api")
	os.Remove(path)
	err = next(t, results)
	if !errors.Is(err, os.ErrNotExist) || ReloadResult(err) != ResultFailure {
		t.Fatalf("deleted file reported as %v (%s), want a failure naming the missing file", err, ReloadResult(err))
	}
	if h.Policy().MaxAttempts != 2 {
		t.Fatal("the old policies must keep serving")
	}
	os.WriteFile(path, attemptsFile(3), 0o644)
	for {
		if err := next(t, results); err == nil {
			break
		}
	}
	if n := h.Policy().MaxAttempts; n != 3 {
		t.Fatalf("after the file came back: %d attempts, want 3", n)
	}
}
