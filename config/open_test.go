package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOpenServesOnlyAValidFile (issue #25 blocker 2): the safe start is
// synchronous. Open returns the file's error and no Registry for a missing
// or invalid file, and a Registry already serving the file for a valid one,
// so no call can run with the zero Policy while a goroutine loads.
func TestOpenServesOnlyAValidFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if r, err := Open(missing, Options{Logger: discard}); err == nil || r != nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: registry %v, err %v; want no registry and ErrNotExist", r, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("policies:\n  api:\n    max_attempts: lots\n"), 0o644)
	var reported []error
	r, err := Open(bad, Options{Logger: discard, OnReload: func(_ string, err error) { reported = append(reported, err) }})
	var e *Error
	if r != nil || !errors.As(err, &e) || e.Problems[0].Line != 3 {
		t.Fatalf("invalid file: registry %v, err %v; want no registry and a line-numbered *Error", r, err)
	}
	if len(reported) != 1 || reported[0] != err {
		t.Fatalf("OnReload heard %v, want the one rejection", reported)
	}
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, attemptsFile(4), 0o644)
	r, err = Open(good, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Policy("api").Policy().MaxAttempts; got != 4 || r.Version() == "" {
		t.Fatalf("Open served %d attempts (version %q), want the file's 4", got, r.Version())
	}
}

// TestWatchStartsSynchronously (issue #25 blocker 2): Watch returns once
// the watch is in place, with its error, instead of running until a
// context ends, so a caller cannot lose the first error in a goroutine.
// It reads the file once more after the watch is set up, so an edit made
// between Open and Watch is applied before Watch returns.
func TestWatchStartsSynchronously(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, attemptsFile(2), 0o644)
	results := make(chan error, 16)
	r, err := Open(path, Options{Logger: discard, OnReload: func(_ string, err error) { results <- err }})
	if err != nil {
		t.Fatal(err)
	}
	<-results
	h := r.Policy("api")
	os.WriteFile(path, attemptsFile(3), 0o644) // before the watch exists
	w, err := r.Watch(path, WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := h.Policy().MaxAttempts; got != 3 {
		t.Fatalf("after Watch returned: %d attempts, want the edit made before it (3)", got)
	}
	<-results
	os.WriteFile(path, attemptsFile(5), 0o644)
	expect(t, "edit while watched", results, h, 5)
	w.Close()
	w.Close() // a second Close does nothing

	// Errors of the start come back from Watch itself.
	if w, err := r.Watch(filepath.Join(dir, "no-such-dir", "p.yaml"), WatchOptions{}); err == nil || w != nil {
		t.Fatalf("Watch in a missing directory: watcher %v, err %v", w, err)
	}
	// A registry with policies keeps them when the file has gone bad by the
	// time Watch starts: the rejection is reported and the watch runs.
	os.WriteFile(path, []byte("policies: {api: {max_attempts: lots}}\n"), 0o644)
	w2, err := r.Watch(path, WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Watch of a bad file with policies in force: %v", err)
	}
	defer w2.Close()
	if err := next(t, results); err == nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("bad file at start: reported %v, attempts %d; want a rejection and 5", err, h.Policy().MaxAttempts)
	}
	os.WriteFile(path, attemptsFile(6), 0o644)
	expect(t, "valid edit after a bad start", results, h, 6)
}

// TestHandleBeforeAnyFileWarns: a registry made with NewRegistry serves the
// zero Policy until a file is applied; asking for a handle then says so in
// the log, naming Open.
func TestHandleBeforeAnyFileWarns(t *testing.T) {
	var buf bytes.Buffer
	r := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	h := r.Policy("api")
	if p := h.Policy(); p == nil || p.Budget != nil || p.Operation != "api" {
		t.Fatalf("policy before any file: %+v", p)
	}
	if !strings.Contains(buf.String(), "no policy file loaded yet") || !strings.Contains(buf.String(), "config.Open") {
		t.Fatalf("log: %q", buf.String())
	}
}

// TestWatchRepointedLinkWithConcurrentReloads (issue #25 blocker 2): the
// watched path is a symlink re-pointed from release to release while other
// goroutines call Reload (a SIGHUP handler) as fast as they can. Every call
// sees a whole policy of one release, and once the link rests on the last
// release, that release is served and is the version in force.
func TestWatchRepointedLinkWithConcurrentReloads(t *testing.T) {
	base := t.TempDir()
	releases := filepath.Join(base, "releases")
	const n = 6
	for i := 1; i <= n; i++ {
		d := filepath.Join(releases, fmt.Sprintf("v%d", i))
		mkdirs(t, d)
		// Each release pairs max_attempts i with a budget of i*10 tokens,
		// so a torn read (attempts of one release, budget of another) shows.
		src := fmt.Sprintf("policies: {api: {max_attempts: %d, budget: {kind: ratio, max_tokens: %d}}}\n", i, i*10)
		os.WriteFile(filepath.Join(d, "p.yaml"), []byte(src), 0o644)
	}
	current := filepath.Join(releases, "current")
	symlink(t, "v1", current)
	path := filepath.Join(base, "p.yaml")
	symlink(t, filepath.Join(current, "p.yaml"), path)
	results := make(chan error, 1024)
	r, err := Open(path, Options{Logger: discard, OnReload: func(_ string, err error) {
		select {
		case results <- err:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Watch(path, WatchOptions{Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := r.Policy("api")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() { // SIGHUP handlers
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r.Reload(path) // a mid-swap read may fail; it is reported, not applied
			}
		}()
	}
	wg.Add(1)
	go func() { // callers
		defer wg.Done()
		for i := 0; i < 200000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := h.Policy()
			b, ok := p.Budget.(interface{ Available() float64 })
			if p.MaxAttempts < 1 || p.MaxAttempts > n || !ok || b.Available() != float64(p.MaxAttempts*10) {
				errs <- fmt.Errorf("policy %+v", p)
				return
			}
		}
	}()
	for i := 2; i <= n; i++ { // deploy: re-point current atomically
		tmp := filepath.Join(releases, "current.new")
		symlink(t, fmt.Sprintf("v%d", i), tmp)
		if err := os.Rename(tmp, current); err != nil {
			t.Fatal(err)
		}
	}
	final, _ := os.ReadFile(filepath.Join(releases, fmt.Sprintf("v%d", n), "p.yaml"))
	deadline := time.After(10 * time.Second)
	for r.Version() != versionOf(final) || h.Policy().MaxAttempts != n {
		select {
		case <-results:
		case <-deadline:
			t.Fatalf("after the last re-point: version %q, attempts %d; want %q, %d", r.Version(), h.Policy().MaxAttempts, versionOf(final), n)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if err := r.Reload(path); err != nil || h.Policy().MaxAttempts != n {
		t.Fatalf("at rest: err %v, attempts %d", err, h.Policy().MaxAttempts)
	}
}
