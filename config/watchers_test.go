package config

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stormguard/stormguard/retry"
)

// watchRecorder is a retry.Observer that is also a ReloadObserver,
// BudgetWatcher and BreakerWatcher, recording what it was told.
type watchRecorder struct {
	retry.NopObserver
	mu      sync.Mutex
	reloads []string
	budgets map[string]retry.Budget // operation -> budget watched now
	brks    map[string]retry.Breaker
	events  []string
}

func newWatchRecorder() *watchRecorder {
	return &watchRecorder{budgets: map[string]retry.Budget{}, brks: map[string]retry.Breaker{}}
}

func (w *watchRecorder) ConfigReload(v string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reloads = append(w.reloads, ReloadResult(err))
}

func (w *watchRecorder) WatchBudget(op string, b retry.Budget) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.budgets[op] = b
	w.events = append(w.events, "budget+"+op)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.budgets[op] == b {
			delete(w.budgets, op)
		}
		w.events = append(w.events, "budget-"+op)
	}
}

func (w *watchRecorder) WatchBreaker(op string, b retry.Breaker) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.brks[op] = b
	w.events = append(w.events, "breaker+"+op)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.brks[op] == b {
			delete(w.brks, op)
		}
		w.events = append(w.events, "breaker-"+op)
	}
}

func (w *watchRecorder) ops() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for op := range w.budgets {
		out = append(out, "budget:"+op)
	}
	for op := range w.brks {
		out = append(out, "breaker:"+op)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestBudgetsAndBreakersWatchedPerOperation (issue #25 papercut 6): calls
// are labelled by operation (the handle's name), so budgets and breakers
// are handed to the watchers under the operations that use them, not
// under the policy's name; operations sharing a policy share its budget
// and breaker; a reload that changes them re-points the watch, and an
// operation that leaves stops being watched.
func TestBudgetsAndBreakersWatchedPerOperation(t *testing.T) {
	rec := newWatchRecorder()
	var hooked []string
	r := NewRegistry(Options{Logger: discard, Observer: rec,
		OnBudget: func(op string, b retry.Budget) func() { hooked = append(hooked, op); return nil }})
	r.Apply(mustParse(t, `
policies:
  payments: {budget: {kind: ratio, preset: grpc}, breaker: {kind: consecutive, failures: 3}}
  other: {max_attempts: 2}
operations:
  charge-card: payments
  refund: payments
default: payments
`))
	if got := rec.ops(); got != "breaker:charge-card breaker:refund budget:charge-card budget:refund" {
		t.Fatalf("watched after the first file: %s", got)
	}
	cc := r.Policy("charge-card").Policy() // refund gets no handle
	if rec.budgets["charge-card"] != cc.Budget || rec.budgets["refund"] != cc.Budget || rec.brks["refund"] != cc.Breaker {
		t.Fatal("the operations of one policy must be watched with its one budget")
	}
	// A name served by the default policy is watched once a handle exists.
	r.Policy("lookup")
	if got := rec.ops(); !strings.Contains(got, "budget:lookup") || !strings.Contains(got, "breaker:lookup") {
		t.Fatalf("the default policy's handle is not watched: %s", got)
	}
	if strings.Contains(rec.ops(), "payments") {
		t.Fatalf("watched under the policy name: %s", rec.ops())
	}
	// Changing the budget re-points every operation's watch; the breaker's
	// settings are unchanged, so it is kept and not watched again. refund
	// leaves the file and no handle holds it: it is no longer watched.
	rec.events = nil
	r.Apply(mustParse(t, `
policies:
  payments: {budget: {kind: ratio, preset: aws_standard}, breaker: {kind: consecutive, failures: 3}}
operations:
  charge-card: payments
default: payments
`))
	if got := rec.ops(); got != "breaker:charge-card breaker:lookup budget:charge-card budget:lookup" {
		t.Fatalf("watched after the second file: %s", got)
	}
	if nb := r.Policy("charge-card").Policy().Budget; nb == cc.Budget || rec.budgets["charge-card"] != nb {
		t.Fatal("the new budget is not the one watched")
	}
	ev := strings.Join(rec.events, " ")
	for _, want := range []string{"budget+charge-card", "budget-charge-card", "budget-refund", "breaker-refund"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events %q lack %s", ev, want)
		}
	}
	if strings.Contains(ev, "breaker+") {
		t.Errorf("an unchanged breaker was watched again: %s", ev)
	}
	// An operation moved to a policy without budget or breaker is unwatched.
	r.Apply(mustParse(t, `
policies:
  payments: {budget: {kind: ratio, preset: aws_standard}, breaker: {kind: consecutive, failures: 3}}
  plain: {max_attempts: 2}
operations:
  charge-card: plain
default: payments
`))
	if got := rec.ops(); got != "breaker:lookup budget:lookup" {
		t.Fatalf("watched after charge-card moved to a plain policy: %s", got)
	}
	slices.Sort(hooked) // map order within one apply
	if fmt.Sprint(hooked) != "[charge-card charge-card lookup lookup refund]" {
		t.Errorf("OnBudget heard %v, want each operation once per budget it got", hooked)
	}
}

// TestObserverInterfacesFoundInsideMulti (issue #25 papercut 5): with the
// observer given as retry.Multi(...), as the Prometheus README advises,
// config still finds ReloadObserver, BudgetWatcher and BreakerWatcher in
// each member, a nested Multi included.
func TestObserverInterfacesFoundInsideMulti(t *testing.T) {
	a, b := newWatchRecorder(), newWatchRecorder()
	obs := retry.Multi(a, retry.Multi(retry.NopObserver{}, b))
	r := NewRegistry(Options{Logger: discard, Observer: obs})
	r.Apply(mustParse(t, "policies: {p: {budget: {kind: concurrency}, breaker: {kind: consecutive, failures: 2}}}\noperations: {op: p}\n"))
	if err := r.Apply(mustParse(t, "policies: {q: {}}\n")); err == nil { // leaves op without a policy
		t.Fatal("a file without op was applied")
	}
	for i, rec := range []*watchRecorder{a, b} {
		if got := strings.Join(rec.reloads, " "); got != "success failure" {
			t.Errorf("member %d heard reloads %q, want \"success failure\"", i, got)
		}
		if got := rec.ops(); got != "breaker:op budget:op" {
			t.Errorf("member %d watches %q", i, got)
		}
	}
}
