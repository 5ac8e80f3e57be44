package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

func mustParse(t testing.TB, src string) *File {
	t.Helper()
	f, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHandlesResolveNames(t *testing.T) {
	r := NewRegistry(Options{Logger: discard})
	early := r.Policy("charge-card") // before any file: the zero policy
	if p := early.Policy(); p == nil || p.MaxAttempts != 0 || p.Operation != "charge-card" || early.Spec() != nil {
		t.Fatalf("early policy %+v", p)
	}
	f, err := Load("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.Apply(f)
	for _, tc := range []struct{ name, policy string }{
		{"charge-card", "payments"}, {"payments", "payments"}, {"export-spans", "telemetry"}, {"unlisted", "default"},
	} {
		h := r.Policy(tc.name)
		if h.Spec() == nil || h.Spec().Name != tc.policy {
			t.Fatalf("%s resolved to %+v, want %s", tc.name, h.Spec(), tc.policy)
		}
		if h.Policy().Operation != tc.name {
			t.Fatalf("%s: Operation = %q", tc.name, h.Policy().Operation)
		}
	}
	if early.Policy().MaxAttempts != 4 {
		t.Fatal("a handle taken before the file did not follow it")
	}
	p := r.Policy("charge-card").Policy()
	if _, ok := p.Budget.(*budget.Ratio); !ok || p.Breaker == nil || p.AttemptTimeout != 2*time.Second {
		t.Fatalf("payments policy %+v", p)
	}
	if r.Policy("charge-card") != early || r.Policy("refund").Policy().Budget != p.Budget {
		t.Fatal("operations of one policy must share its budget")
	}
	if r.Version() != f.Version {
		t.Fatal("version")
	}
}

func TestReloadKeepsUnchangedState(t *testing.T) {
	var created []string
	r := NewRegistry(Options{Logger: discard, OnBreaker: func(op string, _ retry.Breaker) func() {
		created = append(created, op)
		return nil
	}})
	v1 := `
policies:
  a: {breaker: {kind: consecutive, failures: 2}, budget: {kind: ratio, preset: grpc}}
  b: {breaker: {kind: consecutive, failures: 3}, budget: {kind: concurrency}}
`
	r.Apply(mustParse(t, v1))
	a, b := r.Policy("a"), r.Policy("b")
	ab, bb := a.Policy().Breaker, b.Policy().Breaker
	// Trip a's breaker.
	for i := 0; i < 2; i++ {
		done, err := ab.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errors.New("down"))
	}
	if ab.(*breaker.Breaker).State() != breaker.Open {
		t.Fatal("breaker did not trip")
	}
	v2 := `
policies:
  a: {max_attempts: 7, breaker: {kind: consecutive, failures: 2}, budget: {kind: ratio, preset: grpc}}
  b: {breaker: {kind: consecutive, failures: 4}, budget: {kind: concurrency, min_concurrency: 5}}
`
	r.Apply(mustParse(t, v2))
	if a.Policy().MaxAttempts != 7 || a.Policy().Breaker != ab || a.Policy().Budget == nil {
		t.Fatal("a's unchanged breaker must survive the reload")
	}
	if a.Policy().Breaker.(*breaker.Breaker).State() != breaker.Open {
		t.Fatal("a's breaker forgot it was open")
	}
	if b.Policy().Breaker == bb {
		t.Fatal("b's changed breaker must start fresh")
	}
	if fmt.Sprint(created) != "[a b b]" && fmt.Sprint(created) != "[b a b]" {
		t.Fatalf("breakers created %v", created)
	}
	applied, _ := r.Stats()
	r.Apply(mustParse(t, v2)) // the same content: nothing happens
	if again, _ := r.Stats(); again != applied {
		t.Fatal("re-applying the same version counted")
	}
}

type reloadRecorder struct {
	retry.NopObserver
	mu       sync.Mutex
	versions []string
	errs     []error
}

func (o *reloadRecorder) ConfigReload(v string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.versions = append(o.versions, v)
	o.errs = append(o.errs, err)
}

func TestInvalidReloadKeepsServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte("policies: {api: {max_attempts: 3}}\n"), 0o644)
	obs := &reloadRecorder{}
	var cbErr error
	r := NewRegistry(Options{Logger: discard, Observer: obs, OnReload: func(_ string, err error) { cbErr = err }})
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("api")
	os.WriteFile(path, []byte("policies: {api: {max_attempts: -1}}\n"), 0o644)
	err := r.Reload(path)
	if err == nil || cbErr == nil || h.Policy().MaxAttempts != 3 {
		t.Fatalf("err=%v cb=%v attempts=%d", err, cbErr, h.Policy().MaxAttempts)
	}
	if _, rejected := r.Stats(); rejected != 1 {
		t.Fatal("rejection not counted")
	}
	if len(obs.errs) != 2 || obs.errs[0] != nil || obs.errs[1] == nil || h.Policy().Observer != obs {
		t.Fatalf("observer heard %v %v", obs.versions, obs.errs)
	}
	// The same bad content again (another event of one save) is not reported again.
	if err := r.Reload(path); err == nil {
		t.Fatal("the rejected content was accepted on a second read")
	}
	if _, rejected := r.Stats(); rejected != 1 || len(obs.errs) != 2 {
		t.Fatalf("a repeated read of rejected content was reported: rejected %d, observer %v", rejected, obs.errs)
	}
	// Bad content that comes back after a good file is reported again.
	os.WriteFile(path, []byte("policies: {api: {max_attempts: 5}}\n"), 0o644)
	if err := r.Reload(path); err != nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("good file: err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	os.WriteFile(path, []byte("policies: {api: {max_attempts: -1}}\n"), 0o644)
	if err := r.Reload(path); err == nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("bad file again: err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}
	if _, rejected := r.Stats(); rejected != 2 || len(obs.errs) != 4 || obs.errs[3] == nil {
		t.Fatalf("bad content after a good file: rejected %d, observer heard %v", rejected, obs.errs)
	}
}

// versionFile writes a policy file whose fields all encode k, so a reader
// can tell a whole policy from a torn one; invalid files carry 999.
func versionFile(k int, valid bool) string {
	if !valid {
		return fmt.Sprintf("policies: {api: {max_attempts: 999, attempt_timeout: %dms, backoff: {base: 2s, max: 1s}}}\n", k)
	}
	return fmt.Sprintf("policies: {api: {max_attempts: %d, attempt_timeout: %dms, min_attempt_time: %dms, backoff: {strategy: constant, base: %dms}}}\n", k, k, k, k)
}

func TestConcurrentReloadsNeverTear(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte(versionFile(1, true)), 0o644)
	r := NewRegistry(Options{Logger: discard})
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("api")
	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				p := h.Policy()
				k := p.MaxAttempts
				d := time.Duration(k) * time.Millisecond
				c, _ := p.Backoff.(backoff.Constant)
				if k == 999 || p.AttemptTimeout != d || p.MinAttemptTime != d || c.Interval != d {
					errs <- fmt.Errorf("torn or invalid policy: attempts %d, timeout %v, min %v, backoff %v", k, p.AttemptTimeout, p.MinAttemptTime, c.Interval)
					return
				}
				retry.Run(context.Background(), p, func(context.Context) error { return nil })
				calls.Add(1)
			}
		}()
	}
	rejected := 0
	for i := 2; i <= 101; i++ {
		valid := i%2 == 0
		tmp := path + ".tmp"
		os.WriteFile(tmp, []byte(versionFile(i, valid)), 0o644)
		os.Rename(tmp, path)
		if err := r.Reload(path); (err == nil) != valid {
			t.Fatalf("rewrite %d: valid=%v err=%v", i, valid, err)
		} else if err != nil {
			rejected++
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if h.Policy().MaxAttempts != 100 || rejected != 50 || calls.Load() == 0 {
		t.Fatalf("final attempts %d rejected %d calls %d", h.Policy().MaxAttempts, rejected, calls.Load())
	}
}

// writeFile replaces path's content atomically (write a temporary file,
// rename it over path), as editors and deploy tools do.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileWithoutPoliciesIsRefused (issue #18 item 10): a file that
// defines no policy would reset every handle to the zero Policy, taking
// the budget and the breaker away. It is refused with its line, and the
// old policies keep serving.
func TestFileWithoutPoliciesIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, `
policies:
  payments: {max_attempts: 4, budget: {kind: ratio, preset: grpc}, breaker: {kind: consecutive, failures: 5}}
operations:
  charge-card: payments
`)
	r := NewRegistry(Options{Logger: discard})
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("charge-card")
	for _, tc := range []struct {
		src  string
		line int
	}{
		{"policies: {}\n", 1},
		{"policies: {}\noperations: {}\n", 1},
		{"# emptied by mistake\n\npolicies: {}\noperations: {}\n", 3},
		{`{"policies": {}, "operations": {}}`, 1},
	} {
		writeFile(t, path, tc.src)
		err := r.Reload(path)
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Line != tc.line || ce.Problems[0].Path != "policies" {
			t.Fatalf("%q: Reload = %v, want one problem at line %d on policies", tc.src, err, tc.line)
		}
		if p := h.Policy(); p.MaxAttempts != 4 || p.Budget == nil || p.Breaker == nil {
			t.Fatalf("%q was applied: policy %+v", tc.src, p)
		}
	}
	// A File built by hand is checked as well.
	if err := r.Apply(&File{Version: "handmade"}); err == nil || h.Policy().Budget == nil {
		t.Fatalf("Apply of a File without policies: %v", err)
	}
}

// TestFileMustCoverOperationsInUse (issue #18 item 10): a file that leaves
// an operation in use without a policy (one a handle serves, or one the
// file in force lists) is refused, naming each operation with the line of
// operations, and the old policies keep serving.
func TestFileMustCoverOperationsInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, `
policies:
  payments: {max_attempts: 4, budget: {kind: ratio, preset: grpc}, breaker: {kind: consecutive, failures: 5}}
  search: {max_attempts: 2}
operations:
  charge-card: payments
  refund: payments
`)
	r := NewRegistry(Options{Logger: discard})
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("charge-card")
	writeFile(t, path, `policies:
  payments: {max_attempts: 5}
operations:
  search-api: payments
`)
	err := r.Reload(path)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("Reload = %v, want two problems", err)
	}
	for i, op := range []string{"charge-card", "refund"} {
		if p := ce.Problems[i]; p.Line != 3 || p.Path != "operations" || !strings.Contains(p.Msg, `"`+op+`"`) {
			t.Errorf("problem %d = %+v, want operation %q at line 3", i, p, op)
		}
	}
	if p := h.Policy(); p.MaxAttempts != 4 || p.Budget == nil || p.Breaker == nil {
		t.Fatalf("the refused file was applied: %+v", p)
	}
	// The search policy was in force, but no operation used it: dropping it
	// is fine, and a default covers every name.
	writeFile(t, path, "policies:\n  payments: {max_attempts: 5}\ndefault: payments\n")
	if err := r.Reload(path); err != nil || h.Policy().MaxAttempts != 5 {
		t.Fatalf("a file with a default: err=%v attempts=%d", err, h.Policy().MaxAttempts)
	}

	// A handle taken before the first file counts too: the first file must
	// cover it (so Watch refuses to start on it).
	r2 := NewRegistry(Options{Logger: discard})
	r2.Policy("checkout")
	writeFile(t, path, "policies:\n  payments: {max_attempts: 5}\n")
	if err := r2.Reload(path); err == nil || r2.Version() != "" || !strings.Contains(err.Error(), `p.yaml:1: operations: operation "checkout" is in use`) {
		t.Fatalf("first file without checkout: err=%v version=%q", err, r2.Version())
	}
}

// bigFile is a policy file whose api policy encodes k, padded with other
// policies so that parsing it takes a while and overlapping reloads do
// overlap.
func bigFile(k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policies:\n  api: {max_attempts: %d, attempt_timeout: %dms}\n", k, k)
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&b, "  p%d: {max_attempts: 2, backoff: {strategy: exponential, base: 10ms, max: 1s}, retry_on: {http_status: [429, 503]}}\n", i)
	}
	return b.String()
}

// TestOverlappingReloadsLastReadWins (issue #18 item 12): Reload calls that
// overlap while the file is rewritten (Watch plus a SIGHUP handler, say)
// must leave the file read last in force, and the last report must name
// the version in force.
func TestOverlappingReloadsLastReadWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	var mu sync.Mutex
	var last string
	r := NewRegistry(Options{Logger: discard, OnReload: func(v string, err error) {
		if err == nil {
			mu.Lock()
			last = v
			mu.Unlock()
		}
	}})
	k := 1
	writeFile(t, path, bigFile(k))
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("api")
	for round := 0; round < 40; round++ {
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			k++
			writeFile(t, path, bigFile(k))
			for g := 0; g < 3; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := r.Reload(path); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		final := versionOf([]byte(bigFile(k)))
		mu.Lock()
		reported := last
		mu.Unlock()
		if p := h.Policy(); p.MaxAttempts != k || r.Version() != final || reported != final {
			t.Fatalf("round %d: the file says %d attempts (version %s); the registry serves %d (version %s); last report %s",
				round, k, final, p.MaxAttempts, r.Version(), reported)
		}
	}
}
