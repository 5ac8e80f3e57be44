package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestWatchOverflowReloads (issue #18 item 13): when the watcher's event
// queue overflows, events were lost, perhaps the one of the last edit. The
// overflow is a watcher error, not a rejected file, and a reload from disk
// must follow.
//
// The overflow is real: Watch is held inside OnReload so that nothing
// reads inotify's queue, the test floods the directory with more events
// than the kernel queues (fs.inotify.max_queued_events), then edits the
// file (that event is dropped) and lets Watch go.
func TestWatchOverflowReloads(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the overflow is produced with inotify's queue limit")
	}
	raw, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || queued > 1<<20 {
		t.Fatalf("max_queued_events %q: too many events to overflow in a test", raw)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b") // flooded below
	os.WriteFile(a, nil, 0o644)
	os.WriteFile(b, nil, 0o644)

	var hold atomic.Bool
	held, gate := make(chan struct{}), make(chan struct{})
	var release sync.Once
	results := make(chan error, 16)
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) {
		if hold.CompareAndSwap(true, false) {
			close(held)
			<-gate
		}
		results <- err
	}})
	w, err := r.Watch(path, WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release.Do(func() { close(gate) })
		w.Close()
	})
	if err := next(t, results); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("api")

	hold.Store(true)
	writeFile(t, path, string(attemptsFile(3)))
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
	}
	// Watch is stuck in OnReload. Flood the directory: attribute changes of
	// two files, alternating so that the kernel cannot merge them, beyond
	// the kernel's queue and the batch fsnotify has read already.
	for i := 0; i < queued+2*4096+256; i++ {
		name, mode := a, os.FileMode(0o644)
		if i%2 == 1 {
			name = b
		}
		if i%4 >= 2 {
			mode = 0o600
		}
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	// The queue is full: this edit's events are dropped.
	if err := os.WriteFile(path, attemptsFile(7), 0o644); err != nil {
		t.Fatal(err)
	}
	release.Do(func() { close(gate) })

	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 3 {
		t.Fatalf("the held reload: err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	err = next(t, results)
	if !errors.Is(err, fsnotify.ErrEventOverflow) || !errors.Is(err, ErrWatch) || ReloadResult(err) != ResultWatchError {
		t.Fatalf("got %v (result %q), want the overflow as a watch error", err, ReloadResult(err))
	}
	var labeled interface{ ReloadResult() string }
	if !errors.As(err, &labeled) || labeled.ReloadResult() != "watch_error" {
		t.Fatalf("%v does not carry its result label", err)
	}
	if err := next(t, results); err != nil || h.Policy().MaxAttempts != 7 {
		t.Fatalf("after the overflow: err=%v attempts=%d, want a reload from disk (7)", err, h.Policy().MaxAttempts)
	}
	if applied, rejected := r.Stats(); applied != 3 || rejected != 0 || r.WatchErrors() != 1 {
		t.Fatalf("applied %d rejected %d watch errors %d, want 3 0 1", applied, rejected, r.WatchErrors())
	}
}
