package config

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// panicWatcher is an observer whose WatchBreaker panics while armed.
type panicWatcher struct {
	retry.NopObserver
	armed   *atomic.Bool
	watched atomic.Int64 // breakers watched and not unwatched
}

func (p *panicWatcher) WatchBreaker(op string, b retry.Breaker) func() {
	if p.armed.Load() {
		panic("watcher exploded")
	}
	p.watched.Add(1)
	return func() { p.watched.Add(-1) }
}

const hookFileV1 = `
policies:
  api:
    max_attempts: 2
    breaker: {kind: consecutive, failures: 3}
    budget: {kind: ratio, max_tokens: 10}
`

const hookFileV2 = `
policies:
  api:
    max_attempts: 5
    breaker: {kind: consecutive, failures: 7}
    budget: {kind: ratio, max_tokens: 20}
`

// TestReloadWithPanickingHookKeepsOldPolicies (issue #32 item 6): a
// panicking OnBreaker, OnBudget, OnLimiter or observer Watch* during a
// reload must leave the old policies in force under the old version (all
// or nothing), count the reload as rejected, and re-raise to the caller of
// Reload.
func TestReloadWithPanickingHookKeepsOldPolicies(t *testing.T) {
	for _, hook := range []string{"OnBreaker", "OnBudget", "OnLimiter", "WatchBreaker"} {
		t.Run(hook, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.yaml")
			writeFile(t, path, hookFileV1+"    limiter: {kind: sre, k: 2}\n")
			var armed atomic.Bool
			var live atomic.Int64 // objects watched through the Options hooks, not yet unwatched
			boom := func() {
				if armed.Load() {
					panic(hook + " exploded")
				}
				live.Add(1)
			}
			un := func() { live.Add(-1) }
			opts := Options{Logger: discard}
			obs := &panicWatcher{armed: new(atomic.Bool)}
			switch hook {
			case "OnBreaker":
				opts.OnBreaker = func(string, retry.Breaker) func() { boom(); return un }
			case "OnBudget":
				opts.OnBudget = func(string, retry.Budget) func() { boom(); return un }
			case "OnLimiter":
				opts.OnLimiter = func(string, retry.Limiter) func() { boom(); return un }
			case "WatchBreaker":
				obs.armed = &armed
				opts.Observer = obs
			}
			r, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			h := r.Policy("api")
			old, oldVersion := h.Policy(), r.Version()
			armed.Store(true)
			writeFile(t, path, hookFileV2+"    limiter: {kind: sre, k: 3}\n")
			func() {
				defer func() {
					if recover() == nil {
						t.Error("Reload did not re-raise the hook's panic")
					}
				}()
				r.Reload(path)
			}()
			if p := h.Policy(); p.MaxAttempts != 2 || p.Breaker != old.Breaker || p.Budget != old.Budget || p.Limiter != old.Limiter {
				t.Errorf("after a panicking %s the handle serves attempts=%d (old policy: 2, same parts)", hook, p.MaxAttempts)
			}
			if r.Version() != oldVersion {
				t.Errorf("version %q, want the old %q", r.Version(), oldVersion)
			}
			if applied, rejected := r.Stats(); applied != 1 || rejected != 1 {
				t.Errorf("applied %d rejected %d, want 1 and 1", applied, rejected)
			}
			if n := live.Load() + obs.watched.Load(); n != 1 {
				t.Errorf("%d objects watched after the failed reload, want 1 (the old one; a new one watched before the panic must be unwatched)", n)
			}
			// Unarmed, the same file applies.
			armed.Store(false)
			writeFile(t, path, hookFileV2+"    limiter: {kind: sre, k: 4}\n")
			if err := r.Reload(path); err != nil || h.Policy().MaxAttempts != 5 {
				t.Fatalf("later reload: err=%v attempts=%d", err, h.Policy().MaxAttempts)
			}
		})
	}
}

// TestWatchSurvivesPanickingHook (issue #32 item 6): under Watch, a hook
// that panics during a reload must not crash the process: the reload is
// reported as rejected, the old policies serve, and the watch goes on.
func TestWatchSurvivesPanickingHook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, hookFileV1)
	var armed atomic.Bool
	results := make(chan error, 16)
	r, err := Open(path, Options{Logger: discard,
		OnReload: func(_ string, err error) { results <- err },
		OnBreaker: func(string, retry.Breaker) func() {
			if armed.Load() {
				panic("OnBreaker exploded")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	<-results
	h := r.Policy("api")
	w, err := r.Watch(path, WatchOptions{Debounce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	oldVersion := r.Version()
	armed.Store(true)
	writeFile(t, path, hookFileV2)
	err = next(t, results)
	if !errors.Is(err, ErrHookPanic) || ReloadResult(err) != ResultFailure {
		t.Fatalf("reload report %v (%s), want ErrHookPanic counted as %s", err, ReloadResult(err), ResultFailure)
	}
	if h.Policy().MaxAttempts != 2 || r.Version() != oldVersion {
		t.Fatalf("attempts %d version %q: the old policies must serve", h.Policy().MaxAttempts, r.Version())
	}
	armed.Store(false)
	writeFile(t, path, hookFileV2+"    max_elapsed: 1m\n")
	expect(t, "reload after the panic", results, h, 5)
}
