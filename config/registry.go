package config

import (
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Options configure a Registry. Every field is optional.
type Options struct {
	// Clock is given to the budgets, breakers and policies built from the
	// file. nil: clock.Real.
	Clock clock.Clock
	// Observer is set on every policy. Config also looks in it (and in
	// each member of a retry.Multi) for the optional interfaces
	// ReloadObserver (hears every reload), BudgetWatcher, BreakerWatcher and
	// LimiterWatcher (export each operation's budget, breaker and
	// limiter): the Prometheus and OpenTelemetry adapters implement all
	// four, so Observer: collector,
	// or retry.Multi(collector, otelObserver), is the whole wiring.
	Observer retry.Observer
	// Logger receives a line per reload (Info) and per rejected file
	// (Error). nil: no log lines (OnReload and the observer still hear).
	Logger *slog.Logger
	// OnReload is called after every attempt to apply a file, with the
	// version applied or the error that kept the old policies serving, and
	// after every watcher error (ReloadResult tells them apart). Calls come
	// one at a time, in the order files were applied, while further
	// reloads wait: OnReload must not call Reload or Apply.
	OnReload func(version string, err error)
	// OnBreaker, like a BreakerWatcher in Observer, is called when an
	// operation in use gets a breaker: once per operation and breaker, with
	// the operation name its calls are labelled with (the name given to
	// Registry.Policy, or listed under the file's operations), so breaker
	// and call metrics join on operation. Breakers belong to a policy, so
	// operations of one policy get the same breaker, each under its own
	// name. The function returned, if not nil, is called when the
	// operation stops using that breaker (a reload gave it another one or
	// none). It runs while the registry is locked: it must not call the
	// Registry.
	OnBreaker func(operation string, b retry.Breaker) (unwatch func())
	// OnBudget likewise for budgets (*budget.Ratio, *budget.Window or
	// *budget.Concurrency).
	OnBudget func(operation string, b retry.Budget) (unwatch func())
	// OnLimiter likewise for limiters (*throttle.SRE or *throttle.Adaptive),
	// as a LimiterWatcher in Observer is told them.
	OnLimiter func(operation string, l retry.Limiter) (unwatch func())
	// Classify, if set, builds a policy's Classify function from its
	// spec, e.g. from its retry_on lists. nil: a policy with
	// retry_on.http_status gets httpretry.PolicyClassifier of its
	// PolicySpec.HTTPClassifier, so httpretry.New(nil, handle) follows the
	// list across reloads; a policy with a preset gets the preset's
	// budget.IsAWSRetryable; any other gets retry.DefaultClassifier. (For
	// gRPC, PolicySpec.GRPCRetryable turns retry_on.grpc_codes into the
	// interceptor's classifier; see Handle.Spec.)
	Classify func(spec *PolicySpec) func(error) bool
}

// silent is the logger used when Options.Logger is nil.
var silent = slog.New(slog.DiscardHandler)

// ReloadObserver is implemented by observers (such as the Prometheus
// collector) that export the loaded policy version and reload failures.
// ConfigReload is called like Options.OnReload: in order, one at a time,
// with version "" and a non-nil err for a rejected file or a watcher
// error; ReloadResult(err) gives the result label.
type ReloadObserver interface {
	ConfigReload(version string, err error)
}

// BudgetWatcher is implemented by observers (such as the Prometheus
// collector) that export a retry budget's state under an operation label.
// A Registry whose Options.Observer implements it (or holds one in a
// retry.Multi) calls WatchBudget like Options.OnBudget.
type BudgetWatcher interface {
	WatchBudget(operation string, b retry.Budget) (unwatch func())
}

// BreakerWatcher is implemented by observers that export a circuit
// breaker's state under an operation label; see BudgetWatcher and
// Options.OnBreaker.
type BreakerWatcher interface {
	WatchBreaker(operation string, b retry.Breaker) (unwatch func())
}

// LimiterWatcher is implemented by observers that export a client-side
// limiter's state (a throttle.SRE's rejection probability, a
// throttle.Adaptive's rates) under an operation label; see BudgetWatcher
// and Options.OnLimiter.
type LimiterWatcher interface {
	WatchLimiter(operation string, l retry.Limiter) (unwatch func())
}

// Registry serves the policies of a file through handles that callers keep.
// Applying a new file swaps each handle's policy atomically: a call reads
// one *retry.Policy, old or new, never a mix, and takes no lock.
//
// Budgets, breakers and limiters belong to a policy name and are kept
// across reloads while their settings are unchanged, so a reload does not
// forget that a downstream is failing; changed ones start fresh.
type Registry struct {
	opts Options

	// reloadMu serialises Reload, Apply and Watch's reports: a file is
	// read, checked, applied and reported before the next is read, so the
	// last file read is the one in force and reports come in that order.
	reloadMu sync.Mutex
	mu       sync.Mutex // guards the fields below; held by apply and handle creation
	file     *File
	set      builtSet
	handles  map[string]*Handle
	budgets  map[string]keyed[retry.Budget]
	nested   map[string]keyed[retry.Budget] // policy -> its NestedBudget
	breakers map[string]keyed[*breaker.Breaker]
	limiters map[string]keyed[retry.Limiter]
	watches  map[string]*opWatch // operation -> its watched budget and breaker
	version  atomic.Pointer[string]
	// badVersion and badErr remember the content rejected since the last
	// Apply (guarded by reloadMu).
	badVersion  string
	badErr      error
	loads       atomic.Uint64
	failures    atomic.Uint64
	watchErrors atomic.Uint64
}

// opWatch is what an operation's budget and breaker watchers were given,
// and how to stop them.
type opWatch struct {
	budget    retry.Budget
	unBudget  []func()
	breaker   retry.Breaker
	unBreaker []func()
	limiter   retry.Limiter
	unLimiter []func()
}

type keyed[T any] struct {
	key string
	v   T
}

// Handle is a caller's reference to the policy for one name. Keep it and
// call Policy for every call; it is one atomic load.
type Handle struct {
	name string
	p    atomic.Pointer[retry.Policy]
	spec atomic.Pointer[PolicySpec]

	hedger      atomic.Pointer[hedge.Hedger]
	adaptive    *hedge.Adaptive // guarded by the Registry's mu
	adaptiveKey string
}

// Policy returns the current policy. It is never nil: a name the file
// does not cover gets the zero Policy (with Operation set to the name).
func (h *Handle) Policy() *retry.Policy { return h.p.Load() }

// Spec returns the current policy's specification from the file, or nil
// when the name is not covered.
func (h *Handle) Spec() *PolicySpec { return h.spec.Load() }

// Name returns the name the handle was asked for.
func (h *Handle) Name() string { return h.name }

// Open reads, validates and applies the policy file at path and returns a
// Registry serving it. It is the safe start: it returns an error (with
// every problem of the file, each with its line) and no Registry unless a
// valid file was read, so a process never serves calls without the
// policies it was given. Follow later edits with Registry.Watch.
func Open(path string, opts Options) (*Registry, error) {
	r := NewRegistry(opts)
	if err := r.Reload(path); err != nil {
		return nil, err
	}
	return r, nil
}

// NewRegistry returns an empty Registry; Apply or Reload give it policies.
// Until one does, its handles serve the zero Policy (retry.DefaultMaxAttempts,
// no budget, no breaker): prefer Open, which returns a Registry only with a
// valid file.
func NewRegistry(opts Options) *Registry {
	return &Registry{
		opts:     opts,
		handles:  map[string]*Handle{},
		budgets:  map[string]keyed[retry.Budget]{},
		nested:   map[string]keyed[retry.Budget]{},
		breakers: map[string]keyed[*breaker.Breaker]{},
		limiters: map[string]keyed[retry.Limiter]{},
		watches:  map[string]*opWatch{},
	}
}

// Policy returns the handle for name: an operation listed in the file's
// operations, else a policy name, else the file's default policy. The
// handle follows every later reload. Repeated calls return the same handle.
//
// A name the file in force does not cover gets the zero Policy (and a
// warning in the log). Once asked for, a name is in use: a later file that
// gives it no policy is refused (see Apply).
func (r *Registry) Policy(name string) *Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.handles[name]; ok {
		return h
	}
	h := &Handle{name: name}
	r.handles[name] = h
	r.assign(h, r.file, r.set)
	r.watchOp(name, h.p.Load())
	if r.file == nil {
		r.logger().Warn("config: no policy file loaded yet; the operation gets the zero policy until one is (use config.Open)", "operation", name)
	} else if h.spec.Load() == nil {
		r.logger().Warn("config: no policy in the file for this operation; it gets the zero policy", "operation", name, "version", r.file.Version)
	}
	return h
}

// Version returns the version of the file in force ("" before the first).
func (r *Registry) Version() string {
	if v := r.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Stats returns how many files were applied and how many were rejected
// (unreadable or invalid). Watcher errors are counted apart, by
// WatchErrors.
func (r *Registry) Stats() (applied, rejected uint64) { return r.loads.Load(), r.failures.Load() }

// WatchErrors returns how many errors the file watcher reported (such as
// an event overflow), each followed by a reload from disk.
func (r *Registry) WatchErrors() uint64 { return r.watchErrors.Load() }

// Reload reads, validates and applies the file at path. An invalid file
// changes nothing: the error is returned and reported (OnReload, the
// observer, the log) and the old policies keep serving.
//
// Reloads are serialised: each reads, applies and reports its file before
// the next one reads, so when Reload calls overlap (Watch and a SIGHUP
// handler, say) the file read last is the one in force, and the last
// report names it.
//
// Content already in force, or rejected since the last file was applied,
// is not parsed or reported again, so a burst of file events costs one
// report; bad content that comes back after a good file is reported again.
func (r *Registry) Reload(path string) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		err = fmt.Errorf("config: %w", err)
		r.report("", err)
		return err
	}
	v := versionOf(data)
	if v == r.Version() {
		return nil
	}
	if v == r.badVersion {
		return r.badErr
	}
	f, err := Parse(path, data)
	if err == nil {
		err = r.apply(f)
	}
	if err != nil {
		r.badVersion, r.badErr = v, err
		r.report("", err)
		return err
	}
	r.report(f.Version, nil)
	return nil
}

// Apply makes f's policies current, unless f leaves an operation in use
// without a policy: f must define at least one policy, and every name in
// use — one a Handle was obtained for, or an operation the file in force
// lists — must be listed in f's operations, be one of its policies, or be
// covered by its default. Otherwise Apply returns an *Error naming each
// such operation, reports it like an invalid file, and the old policies
// keep serving. Applying the version in force does nothing.
func (r *Registry) Apply(f *File) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	if f.Version != "" && f.Version == r.Version() {
		return nil
	}
	if err := r.apply(f); err != nil {
		r.report("", err)
		return err
	}
	r.report(f.Version, nil)
	return nil
}

// apply checks and installs f. It must be called with r.reloadMu held.
func (r *Registry) apply(f *File) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(f); err != nil {
		return err
	}
	built := r.build(f)
	for _, h := range r.handles {
		r.assign(h, f, built)
	}
	r.file, r.set = f, built
	r.syncWatches()
	r.badVersion, r.badErr = "", nil
	r.version.Store(&f.Version)
	return nil
}

// check refuses a file that would leave an operation in use without a
// policy (and so without its budget and breaker). It must be called with
// r.mu held.
func (r *Registry) check(f *File) error {
	if len(f.Policies) == 0 {
		return &Error{[]Problem{{File: f.name, Line: f.policiesLine, Path: "policies", Msg: noPolicy}}}
	}
	why := map[string]string{}
	for name := range r.handles {
		if !f.covers(name) {
			why[name] = "a handle serves it"
		}
	}
	if r.file != nil {
		for op := range r.file.Operations {
			if _, ok := why[op]; !ok && !f.covers(op) {
				why[op] = "the file in force lists it"
			}
		}
	}
	if len(why) == 0 {
		return nil
	}
	names := make([]string, 0, len(why))
	for n := range why {
		names = append(names, n)
	}
	sort.Strings(names)
	e := &Error{}
	for _, n := range names {
		e.Problems = append(e.Problems, Problem{File: f.name, Line: f.operationsLine, Path: "operations",
			Msg: fmt.Sprintf("operation %q is in use (%s) but this file gives it no policy: list it under operations, or set default", n, why[n])})
	}
	return e
}

// watchError reports an error of the file watcher (not of the file).
func (r *Registry) watchError(err error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.report("", &watchError{err})
}

func (r *Registry) logger() *slog.Logger {
	if r.opts.Logger == nil {
		return silent
	}
	return r.opts.Logger
}

// report counts and announces one reload result. It must be called with
// r.reloadMu held, so that reports come in the order files were applied.
func (r *Registry) report(version string, err error) {
	log := r.logger()
	switch ReloadResult(err) {
	case ResultWatchError:
		r.watchErrors.Add(1)
		log.Warn("config: file watcher error; reloading from disk", "version", r.Version(), "error", err)
	case ResultFailure:
		r.failures.Add(1)
		log.Error("config: policy file rejected; the previous policies keep serving", "version", r.Version(), "error", err)
	default:
		r.loads.Add(1)
		log.Info("config: policies loaded", "version", version)
	}
	retry.EachObserver(r.opts.Observer, func(o retry.Observer) {
		if ro, ok := o.(ReloadObserver); ok {
			ro.ConfigReload(version, err)
		}
	})
	if r.opts.OnReload != nil {
		r.opts.OnReload(version, err)
	}
}

// builtSet maps policy names to their built policies.
type builtSet map[string]*retry.Policy

// build makes a policy per spec, reusing budgets and breakers whose
// settings are unchanged. It must be called with r.mu held.
func (r *Registry) build(f *File) builtSet {
	out := builtSet{}
	keepBudgets := map[string]keyed[retry.Budget]{}
	keepNested := map[string]keyed[retry.Budget]{}
	keepBreakers := map[string]keyed[*breaker.Breaker]{}
	keepLimiters := map[string]keyed[retry.Limiter]{}
	for name, s := range f.Policies {
		var b backoff.Strategy
		if s.Preset != "" && s.Backoff.Strategy == "" {
			_, b = presetRules(s.Preset)
		} else {
			b, _ = backoff.New(s.Backoff.Strategy, s.Backoff.Params) // validated by Parse
		}
		p := &retry.Policy{
			MaxAttempts:    s.MaxAttempts,
			MaxElapsed:     s.MaxElapsed,
			Backoff:        b,
			AttemptTimeout: s.AttemptTimeout,
			MinAttemptTime: s.MinAttemptTime,
			MaxRetryAfter:  s.MaxRetryAfter,
			Nested:         s.Nested.Rule,
			Clock:          r.opts.Clock,
			Observer:       r.opts.Observer,
		}
		if r.opts.Classify != nil {
			p.Classify = r.opts.Classify(s)
		} else if len(s.RetryOn.HTTPStatus) > 0 {
			// retry_on travels with the policy, so a transport built once
			// over the Handle classifies by the file's current list.
			p.Classify = httpretry.PolicyClassifier(s.HTTPClassifier())
		} else if s.Preset != "" {
			p.Classify = budget.IsAWSRetryable
		}
		if s.Budget != nil {
			key := budgetKey(s.Budget)
			old, ok := r.budgets[name]
			if !ok || old.key != key {
				old = keyed[retry.Budget]{key, r.newBudget(s.Budget)}
			}
			keepBudgets[name] = old
			p.Budget = old.v
		}
		if nb := s.Nested.Budget; nb != nil {
			key := budgetKey(nb)
			old, ok := r.nested[name]
			if !ok || old.key != key {
				old = keyed[retry.Budget]{key, r.newBudget(nb)}
			}
			keepNested[name] = old
			p.NestedBudget = old.v
		}
		if s.Breaker != nil {
			key := fmt.Sprintf("%s %+v", s.Breaker.Kind, s.Breaker.Config)
			old, ok := r.breakers[name]
			if !ok || old.key != key {
				old = keyed[*breaker.Breaker]{key, r.newBreaker(s.Breaker)}
			}
			keepBreakers[name] = old
			p.Breaker = old.v
		}
		if s.Limiter != nil {
			key := limiterKey(s.Limiter)
			old, ok := r.limiters[name]
			if !ok || old.key != key {
				old = keyed[retry.Limiter]{key, r.newLimiter(s.Limiter)}
			}
			keepLimiters[name] = old
			p.Limiter = old.v
		}
		out[name] = p
	}
	for name, old := range r.breakers {
		if keep, ok := keepBreakers[name]; !ok || keep.v != old.v {
			old.v.Close() // stops its active probing, if any
		}
	}
	r.budgets, r.nested, r.breakers, r.limiters = keepBudgets, keepNested, keepBreakers, keepLimiters
	return out
}

// budgetKey identifies a budget's settings: a budget is kept across a
// reload while its key is unchanged.
func budgetKey(s *BudgetSpec) string {
	return fmt.Sprintf("%s %+v %+v %+v", s.Kind, s.Ratio, s.Window, s.Concurrency)
}

func (r *Registry) newBudget(s *BudgetSpec) retry.Budget {
	switch s.Kind {
	case "ratio":
		return budget.NewRatio(s.Ratio)
	case "window":
		c := s.Window
		c.Clock = r.opts.Clock
		return budget.NewWindow(c)
	case "concurrency":
		return budget.NewConcurrency(s.Concurrency)
	}
	return nil
}

func (r *Registry) newBreaker(s *BreakerSpec) *breaker.Breaker {
	c := s.Config
	c.Clock = r.opts.Clock
	return breaker.New(c)
}

// assign points h at its policy in f. It must be called with r.mu held.
func (r *Registry) assign(h *Handle, f *File, built builtSet) {
	var spec *PolicySpec
	if f != nil {
		name, ok := f.Operations[h.name]
		if !ok {
			if _, isPolicy := f.Policies[h.name]; isPolicy {
				name = h.name
			} else {
				name = f.Default
			}
		}
		spec = f.Policies[name]
	}
	p := &retry.Policy{Clock: r.opts.Clock, Observer: r.opts.Observer}
	if spec != nil && built[spec.Name] != nil {
		cp := *built[spec.Name]
		p = &cp
	}
	p.Operation = h.name
	h.spec.Store(spec)
	h.p.Store(p)
	r.assignHedger(h, spec)
}

// syncWatches gives every operation in use (a handle's, or one the file
// in force lists) its budget and breaker watchers, and stops those of
// operations no longer in use. It must be called with r.mu held, after
// r.file and r.set are installed.
func (r *Registry) syncWatches() {
	inUse := map[string]bool{}
	for name, h := range r.handles {
		inUse[name] = true
		r.watchOp(name, h.p.Load())
	}
	if r.file != nil {
		for op, policy := range r.file.Operations {
			if !inUse[op] {
				inUse[op] = true
				r.watchOp(op, r.set[policy])
			}
		}
	}
	for op := range r.watches {
		if !inUse[op] {
			r.watchOp(op, nil)
		}
	}
}

// watchOp points op's budget, breaker and limiter watchers at p's (p nil: none),
// calling the watchers only for what changed: the new budget is watched
// before the old one is unwatched, so a scrape in between still finds one.
// It must be called with r.mu held.
func (r *Registry) watchOp(op string, p *retry.Policy) {
	var bud retry.Budget
	var brk retry.Breaker
	var lim retry.Limiter
	if p != nil {
		bud, brk, lim = p.Budget, p.Breaker, p.Limiter
	}
	w := r.watches[op]
	if w == nil {
		if bud == nil && brk == nil && lim == nil {
			return
		}
		w = &opWatch{}
		r.watches[op] = w
	}
	obs := r.opts.Observer
	swapWatch(op, &w.budget, &w.unBudget, bud, r.opts.OnBudget, obs, func(o retry.Observer) (func(string, retry.Budget) func(), bool) {
		bw, ok := o.(BudgetWatcher)
		if !ok {
			return nil, false
		}
		return bw.WatchBudget, true
	})
	swapWatch(op, &w.breaker, &w.unBreaker, brk, r.opts.OnBreaker, obs, func(o retry.Observer) (func(string, retry.Breaker) func(), bool) {
		bw, ok := o.(BreakerWatcher)
		if !ok {
			return nil, false
		}
		return bw.WatchBreaker, true
	})
	swapWatch(op, &w.limiter, &w.unLimiter, lim, r.opts.OnLimiter, obs, func(o retry.Observer) (func(string, retry.Limiter) func(), bool) {
		lw, ok := o.(LimiterWatcher)
		if !ok {
			return nil, false
		}
		return lw.WatchLimiter, true
	})
	if bud == nil && brk == nil && lim == nil {
		delete(r.watches, op)
	}
}

// swapWatch moves what watches operation op's object from *cur to next:
// when they differ, it tells hook and every observer watch finds in obs
// (through retry.EachObserver) about next, if any, then calls the unwatch
// functions of *cur's watchers and keeps next's.
func swapWatch[T comparable](op string, cur *T, unwatch *[]func(), next T, hook func(string, T) func(), obs retry.Observer, watch func(retry.Observer) (func(string, T) func(), bool)) {
	if *cur == next {
		return
	}
	var zero T
	var un []func()
	if next != zero {
		if hook != nil {
			un = appendFunc(un, hook(op, next))
		}
		retry.EachObserver(obs, func(o retry.Observer) {
			if f, ok := watch(o); ok {
				un = appendFunc(un, f(op, next))
			}
		})
	}
	for _, f := range *unwatch {
		f()
	}
	*cur, *unwatch = next, un
}

func appendFunc(fs []func(), f func()) []func() {
	if f == nil {
		return fs
	}
	return append(fs, f)
}
