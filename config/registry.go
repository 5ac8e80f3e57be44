package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/httpretry"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// Options configure a Registry. Every field is optional.
type Options struct {
	// Clock is given to the budgets, breakers and policies built from the
	// file. nil: clock.Real.
	Clock clock.Clock
	// Observer is set on every policy. Config also looks in it (and in
	// each member of a retry.Multi) for the optional interfaces
	// ReloadObserver (hears every reload), BudgetWatcher, BreakerWatcher
	// and LimiterWatcher (export each operation's budget, breaker and
	// limiter), AdaptiveWatcher and AdaptivesWatcher (its adaptive hedge
	// delays) and AdmissionWatcher (each admission block's Limiter): the
	// Prometheus and OpenTelemetry adapters implement all seven, so
	// Observer: collector, or retry.Multi(collector, otelObserver), is
	// the whole wiring.
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
	// Registry. If it (or an observer's Watch*) panics while a file is
	// applied, the file is not applied: see Registry.Reload. A panicking
	// unwatch function is recovered and logged.
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
	// awsretry.IsRetryable; any other gets retry.DefaultClassifier. (For
	// gRPC, PolicySpec.GRPCRetryable turns retry_on.grpc_codes into the
	// interceptor's classifier; see Handle.Spec.)
	Classify func(spec *PolicySpec) func(error) bool
	// Shared maps store names to the stores that build the breakers and
	// budgets a file marks shared: NAME (state shared by the fleet, such
	// as redisstore's Store for shared: redis). The connection is given
	// here, in code; the file only names the store. A file naming a store
	// not in Shared is refused. See SharedStore.
	Shared map[string]SharedStore
}

// silent is the logger used when Options.Logger is nil.
var silent = slog.New(slog.DiscardHandler)

// ReloadObserver is implemented by observers (such as the Prometheus
// collector) that export the loaded policy version and reload failures.
// ConfigReload is called like Options.OnReload: in order, one at a time,
// with version "" and a non-nil err for a rejected file or a watcher
// error; ReloadResult(err) gives the result label.
type ReloadObserver interface {
	// ConfigReload hears the outcome of one attempt to apply a file (or
	// of one watcher error): the version now in force and a nil err, or
	// "" and the error. Calls come one at a time, in order, while further
	// reloads wait: it must not call Reload or Apply.
	ConfigReload(version string, err error)
}

// BudgetWatcher is implemented by observers (such as the Prometheus
// collector) that export a retry budget's state under an operation label.
// A Registry whose Options.Observer implements it (or holds one in a
// retry.Multi) calls WatchBudget like Options.OnBudget.
type BudgetWatcher interface {
	// WatchBudget is told that operation (the name its calls are labelled
	// with) now uses the budget b, once per operation and budget, as
	// Options.OnBudget is. It is called while the Registry is locked, one call
	// at a time, and must not call the Registry. The function returned, if not
	// nil, is called once when the budget stops being used under operation (a
	// reload replaced it or took it away); if it panics, the panic is
	// recovered and logged. A panic of the method itself while a file is
	// applied refuses the file (see Registry.Reload).
	WatchBudget(operation string, b retry.Budget) (unwatch func())
}

// BreakerWatcher is implemented by observers that export a circuit
// breaker's state under an operation label; see BudgetWatcher and
// Options.OnBreaker.
type BreakerWatcher interface {
	// WatchBreaker is told that operation now uses the breaker b, once per
	// operation and breaker, as Options.OnBreaker is. It is called while the
	// Registry is locked, one call at a time, and must not call the Registry.
	// The function returned, if not nil, is called once when the breaker stops
	// being used under operation (a reload replaced it or took it away); if it
	// panics, the panic is recovered and logged. A panic of the method itself
	// while a file is applied refuses the file (see Registry.Reload).
	WatchBreaker(operation string, b retry.Breaker) (unwatch func())
}

// LimiterWatcher is implemented by observers that export a client-side
// limiter's state (a throttle.SRE's rejection probability, a
// throttle.Adaptive's rates) under an operation label; see BudgetWatcher
// and Options.OnLimiter.
type LimiterWatcher interface {
	// WatchLimiter is told that operation now uses the limiter l, once per
	// operation and limiter, as Options.OnLimiter is. It is called while the
	// Registry is locked, one call at a time, and must not call the Registry.
	// The function returned, if not nil, is called once when the limiter stops
	// being used under operation (a reload replaced it or took it away); if it
	// panics, the panic is recovered and logged. A panic of the method itself
	// while a file is applied refuses the file (see Registry.Reload).
	WatchLimiter(operation string, l retry.Limiter) (unwatch func())
}

// AdaptiveWatcher is implemented by observers (promretry's and
// otelretry's Collectors) that export an adaptive hedge delay under an
// operation label. A Registry whose Options.Observer implements it (or
// holds one in a retry.Multi) calls WatchAdaptive with the Adaptive of
// each handle whose policy has a hedge block with adaptive (and no per),
// and again when a reload replaces it.
type AdaptiveWatcher interface {
	// WatchAdaptive is told that operation's hedger now uses the adaptive
	// delay a. It is called while the Registry is locked, one call at a time,
	// and must not call the Registry. The function returned, if not nil, is
	// called once when the delay stops being used under operation (a reload
	// replaced it or took it away); if it panics, the panic is recovered and
	// logged. A panic of the method itself while a file is applied refuses the
	// file (see Registry.Reload).
	WatchAdaptive(operation string, a *hedge.Adaptive) (unwatch func())
}

// AdaptivesWatcher is AdaptiveWatcher for a hedge block with adaptive and
// per: one Adaptive delay per key (hedge.Hedger.Adaptives).
type AdaptivesWatcher interface {
	// WatchAdaptives is told that operation's hedger now keeps one adaptive
	// delay per key in g. It is called while the Registry is locked, one call
	// at a time, and must not call the Registry. The function returned, if not
	// nil, is called once when the group stops being used under operation (a
	// reload replaced it or took it away); if it panics, the panic is
	// recovered and logged. A panic of the method itself while a file is
	// applied refuses the file (see Registry.Reload).
	WatchAdaptives(operation string, g *kg.Group[*hedge.Adaptive]) (unwatch func())
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
	parts    parts
	watches  map[string]*opWatch // operation -> its watched budget and breaker
	version  atomic.Pointer[string]
	closed   bool // guarded by mu
	// badVersion and badErr remember the content rejected since the last
	// Apply (guarded by reloadMu).
	badVersion  string
	badErr      error
	loads       atomic.Uint64
	failures    atomic.Uint64
	watchErrors atomic.Uint64

	admission map[string]*AdmissionHandle // guarded by mu; admission.go
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
	delay     any // the handle's *hedge.Adaptive or its keyed group of them
	unDelay   []func()
}

// keyed is a part and the key of the settings it was built with; close,
// if not nil, stops it when a reload drops it.
type keyed[T any] struct {
	key   string
	space string // a keyed part's key space (keySpace); "" unkeyed
	v     T
	close func()
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
	// adaptives is the per-key Adaptive delays of a hedge block with
	// per (keyed.go), guarded by the Registry's mu.
	adaptives      *kg.Group[*hedge.Adaptive]
	adaptivesKey   string
	adaptivesSpace string // its keySpace
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
		opts:    opts,
		handles: map[string]*Handle{},
		parts:   newParts(),
		watches: map[string]*opWatch{},
	}
}

// Policy returns the handle for name: an operation listed in the file's
// operations, else a policy name, else the file's default policy. The
// handle follows every later reload. Repeated calls return the same handle.
//
// A name the file in force does not cover gets the zero Policy (and a
// warning in the log). Once asked for, a name is in use: a later file that
// gives it no policy is refused (see Apply).
//
// If a watch hook (Options.OnBudget, OnBreaker, OnLimiter or an observer's
// Watch*) panics while the new handle's parts are handed to it, no handle
// is made, the watchers already told are told to stop, and the panic goes
// on to the caller.
func (r *Registry) Policy(name string) *Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.handles[name]; ok {
		return h
	}
	h := &Handle{name: name}
	st := r.planHandle(h, r.file, r.set)
	staged, v := r.stageWatches([]opPolicy{{name, st.p, st.hedger}})
	if v != nil {
		panic(v)
	}
	st.store()
	r.handles[name] = h
	r.commitWatches(staged)
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
//
// A file is applied all or nothing. If a watch hook (Options.OnBudget,
// OnBreaker, OnLimiter, or an observer's WatchBudget, WatchBreaker,
// WatchLimiter, WatchAdaptive or WatchAdaptives) panics while the file's
// parts are handed to it, or
// Options.Classify or a SharedStore panics while they are built, the file
// is not applied (the parts built for it are stopped): the old policies keep serving under the old version,
// the watchers already told of the new parts are told to stop, the
// reload is reported and counted as rejected (an error matching
// ErrHookPanic, ResultFailure), and the panic goes on to the caller of
// Reload. Such content is not remembered as rejected: the next Reload of
// it tries again. (Watch recovers the panic: see Watch.)
func (r *Registry) Reload(path string) error {
	err := r.reload(path)
	if hp, ok := err.(*hookPanicError); ok {
		panic(hp.v)
	}
	return err
}

// reload is Reload, returning a hook's panic as a *hookPanicError.
func (r *Registry) reload(path string) error {
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
		if _, ok := err.(*hookPanicError); !ok {
			r.badVersion, r.badErr = v, err
		}
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
// keep serving. So it does, naming each field, for a File built in code
// whose specs could not be built as given (see the package doc: a Name
// other than its key, an operation or default naming a policy f does not
// hold, a backoff backoff.New refuses, a per other than host or method or
// two pers in one policy, a config its Validate refuses, an unknown kind,
// a keyed window beyond MaxKeyedWindowBytes, an admission block that
// cannot be built), and for a nil f. Applying the version in force does nothing. A panicking
// watch hook is handled as by Reload: nothing applied, counted as
// rejected, the panic re-raised.
func (r *Registry) Apply(f *File) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	if f == nil {
		err := &Error{[]Problem{{Msg: "no file: Apply was given a nil *File"}}}
		r.report("", err)
		return err
	}
	if f.Version != "" && f.Version == r.Version() {
		return nil
	}
	if err := r.apply(f); err != nil {
		r.report("", err)
		if hp, ok := err.(*hookPanicError); ok {
			panic(hp.v)
		}
		return err
	}
	r.report(f.Version, nil)
	return nil
}

// hookPanicError is the error of a file not applied because a watch hook
// panicked; v is the panic's value.
type hookPanicError struct{ v any }

func (e *hookPanicError) Error() string {
	return fmt.Sprintf("config: a callback (watch hook, Classify or shared store) panicked while the file was applied; the previous policies keep serving: %v", e.v)
}
func (e *hookPanicError) Unwrap() error { return ErrHookPanic }

// apply checks and installs f, all or nothing: it builds f's parts,
// hands them to the watch hooks, and only when every hook returned makes
// them current. It must be called with r.reloadMu held.
func (r *Registry) apply(f *File) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := joinErrors(checkSpecs(f), r.check(f)); err != nil {
		return err
	}
	plan, err := r.build(f)
	if err != nil {
		return err
	}
	states := make([]handleState, 0, len(r.handles))
	inUse := map[string]*retry.Policy{}
	hedgers := map[string]*hedge.Hedger{}
	for name, h := range r.handles {
		st := r.planHandle(h, f, plan.set)
		states = append(states, st)
		inUse[name], hedgers[name] = st.p, st.hedger
	}
	for op, policy := range f.Operations {
		if _, ok := inUse[op]; !ok {
			inUse[op] = plan.set[policy]
		}
	}
	for op := range r.watches {
		if _, ok := inUse[op]; !ok {
			inUse[op] = nil
		}
	}
	ops := make([]opPolicy, 0, len(inUse))
	for op, p := range inUse {
		ops = append(ops, opPolicy{op, p, hedgers[op]})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].op < ops[j].op })
	staged, v := r.stageWatches(ops)
	if v != nil {
		plan.discard()
		return &hookPanicError{v}
	}
	// Every hook returned: make f current.
	for _, st := range states {
		st.store()
	}
	old := r.parts
	r.file, r.set, r.parts = f, plan.set, plan.parts
	r.commitWatches(staged)
	old.closeDropped(plan.parts)
	r.badVersion, r.badErr = "", nil
	r.version.Store(&f.Version)
	r.applyAdmission(f)
	return nil
}

// ErrClosed is returned by Reload and Apply after Registry.Close.
var ErrClosed = errors.New("config: registry closed")

// Close stops the parts of the policies in force that run in the
// background: the shared breakers and budgets a SharedStore built (whose
// Close, such as redisstore's, gives back leased tokens and stops the
// exchange with the store) and breakers' active probing. Later Reload and
// Apply calls fail with ErrClosed. Handles keep serving the policies in
// force, with their parts stopped: close the Registry when the process no
// longer makes calls, after the Watcher. Calling it again does nothing.
// It returns nil.
func (r *Registry) Close() error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.parts.closeDropped(newParts())
	return nil
}

// joinErrors returns the problems of a and b (each nil or an *Error) as
// one *Error, or nil when both are nil.
func joinErrors(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return &Error{append(append([]Problem(nil), a.(*Error).Problems...), b.(*Error).Problems...)}
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

// parts are the budgets, breakers and limiters of the policies in force,
// by policy name.
type parts struct {
	budgets  map[string]keyed[retry.Budget]
	nested   map[string]keyed[retry.Budget] // policy -> its NestedBudget
	breakers map[string]keyed[retry.Breaker]
	limiters map[string]keyed[retry.Limiter]
}

func newParts() parts {
	return parts{
		budgets:  map[string]keyed[retry.Budget]{},
		nested:   map[string]keyed[retry.Budget]{},
		breakers: map[string]keyed[retry.Breaker]{},
		limiters: map[string]keyed[retry.Limiter]{},
	}
}

// closeDropped stops the parts of p that next does not keep.
func (p parts) closeDropped(next parts) {
	closeDropped(p.budgets, next.budgets)
	closeDropped(p.nested, next.nested)
	closeDropped(p.breakers, next.breakers)
	closeDropped(p.limiters, next.limiters)
}

func closeDropped[T comparable](old, next map[string]keyed[T]) {
	for name, o := range old {
		if o.close == nil {
			continue
		}
		if keep, ok := next[name]; ok && keep.v == o.v {
			continue
		}
		o.close()
	}
}

// buildPlan is a file's policies and parts, built but not yet in force.
type buildPlan struct {
	set   builtSet
	parts parts
	fresh []func() // stops the parts built for this file (none kept from the file in force)
}

// discard stops the parts built for a file that is not applied.
func (b *buildPlan) discard() {
	for _, f := range b.fresh {
		f()
	}
	b.fresh = nil
}

// keep returns the part for name from cur when its key is unchanged, or
// builds a new one with make (recording its close function in fresh).
func keep[T any](b *buildPlan, cur map[string]keyed[T], name, key string, make func() (T, func(), error)) (keyed[T], error) {
	if old, ok := cur[name]; ok && old.key == key {
		return old, nil
	}
	v, closeFn, err := make()
	if err != nil {
		return keyed[T]{}, err
	}
	if closeFn != nil {
		b.fresh = append(b.fresh, closeFn)
	}
	return keyed[T]{key: key, v: v, close: closeFn}, nil
}

// build makes a policy per spec, reusing budgets, breakers and limiters
// whose settings are unchanged. It changes nothing in r: on error, the
// parts it built are stopped. It must be called with r.mu held.
//
// A panic of Options.Classify or a SharedStore is returned as a
// *hookPanicError, the parts built so far stopped.
func (r *Registry) build(f *File) (_ *buildPlan, err error) {
	plan := &buildPlan{set: builtSet{}, parts: newParts()}
	defer func() {
		if v := recover(); v != nil {
			err = &hookPanicError{v}
		}
		if err != nil {
			plan.discard()
		}
	}()
	cur := r.parts
	names := make([]string, 0, len(f.Policies))
	for name := range f.Policies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := f.Policies[name] // checked by checkSpecs
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
			p.Classify = awsretry.IsRetryable
		}
		if s.Budget != nil {
			k, err := keepPart(plan, r, cur.budgets, name, budgetKey(s.Budget), s.Budget.Keys, func() (retry.Budget, func(), error) {
				return r.newBudget(f.name, "policies."+name+".budget", name, s.Budget)
			}, r.budgetGroupOf(f.name, "policies."+name+".budget", name, s.Budget))
			if err != nil {
				return nil, err
			}
			plan.parts.budgets[name] = k
			p.Budget = k.v
		}
		if nb := s.Nested.Budget; nb != nil {
			k, err := keepPart(plan, r, cur.nested, name, budgetKey(nb), nb.Keys, func() (retry.Budget, func(), error) {
				return r.newBudget(f.name, "policies."+name+".nested.budget", name+".nested", nb)
			}, r.budgetGroupOf(f.name, "policies."+name+".nested.budget", name+".nested", nb))
			if err != nil {
				return nil, err
			}
			plan.parts.nested[name] = k
			p.NestedBudget = k.v
		}
		if s.Breaker != nil {
			k, err := keepPart(plan, r, cur.breakers, name, breakerKey(s.Breaker), s.Breaker.Keys, func() (retry.Breaker, func(), error) {
				return r.newBreaker(f.name, "policies."+name+".breaker", name, s.Breaker)
			}, r.breakerGroupOf(f.name, "policies."+name+".breaker", name, s.Breaker))
			if err != nil {
				return nil, err
			}
			plan.parts.breakers[name] = k
			p.Breaker = k.v
		}
		if s.Limiter != nil {
			k, err := keepPart(plan, r, cur.limiters, name, limiterKey(s.Limiter), s.Limiter.Keys, func() (retry.Limiter, func(), error) { return r.newLimiter(s.Limiter), nil, nil }, limiterGroup)
			if err != nil {
				return nil, err
			}
			plan.parts.limiters[name] = k
			p.Limiter = k.v
		}
		plan.set[name] = p
	}
	return plan, nil
}

// budgetKey identifies a budget's settings: a budget is kept across a
// reload while its key is unchanged.
func budgetKey(s *BudgetSpec) string {
	return fmt.Sprintf("%s %+v %+v %+v shared=%q", s.Kind, s.Ratio, s.Window, s.Concurrency, s.Shared)
}

// breakerKey identifies a breaker's settings, likewise.
func breakerKey(s *BreakerSpec) string {
	return fmt.Sprintf("%s %+v shared=%q", s.Kind, s.Config, s.Shared)
}

// newBudget builds the budget s describes for the policy (or nested
// budget) name, and the function that stops it (nil: nothing to stop).
// file and field name the block in errors.
func (r *Registry) newBudget(file, field, name string, s *BudgetSpec) (retry.Budget, func(), error) {
	if s.Shared != "" {
		st, err := r.sharedStore(file, field+".shared", s.Shared)
		if err != nil {
			return nil, nil, err
		}
		b, closeFn, err := st.SharedBudget(name, s.Ratio)
		if err != nil {
			return nil, nil, sharedError(file, field, s.Shared, err)
		}
		return b, closeFn, nil
	}
	switch s.Kind {
	case "ratio":
		return budget.NewRatio(s.Ratio), nil, nil
	case "window":
		c := s.Window
		c.Clock = r.opts.Clock
		return budget.NewWindow(c), nil, nil
	case "concurrency":
		return budget.NewConcurrency(s.Concurrency), nil, nil
	}
	return nil, nil, nil
}

// newBreaker builds the breaker s describes for the policy name, and the
// function that stops it.
func (r *Registry) newBreaker(file, field, name string, s *BreakerSpec) (retry.Breaker, func(), error) {
	c := s.Config
	c.Clock = r.opts.Clock
	if s.Shared != "" {
		st, err := r.sharedStore(file, field+".shared", s.Shared)
		if err != nil {
			return nil, nil, err
		}
		b, closeFn, err := st.SharedBreaker(name, c)
		if err != nil {
			return nil, nil, sharedError(file, field, s.Shared, err)
		}
		return b, closeFn, nil
	}
	b := breaker.New(c)
	return b, b.Close, nil // Close stops its active probing, if any
}

// handleState is what a handle will serve once a file is in force.
type handleState struct {
	h              *Handle
	p              *retry.Policy
	spec           *PolicySpec
	hedger         *hedge.Hedger
	adaptive       *hedge.Adaptive
	adaptiveKey    string
	adaptives      *kg.Group[*hedge.Adaptive]
	adaptivesKey   string
	adaptivesSpace string // its keySpace
}

// store makes st what its handle serves.
func (st handleState) store() {
	h := st.h
	h.adaptive, h.adaptiveKey = st.adaptive, st.adaptiveKey
	h.adaptives, h.adaptivesKey, h.adaptivesSpace = st.adaptives, st.adaptivesKey, st.adaptivesSpace
	h.spec.Store(st.spec)
	h.p.Store(st.p)
	h.hedger.Store(st.hedger)
}

// planHandle works out h's policy in f, changing nothing. It must be
// called with r.mu held.
func (r *Registry) planHandle(h *Handle, f *File, built builtSet) handleState {
	var spec *PolicySpec
	var name string // spec's key under f.Policies, which built uses too
	if f != nil {
		name = f.PolicyOf(h.name)
		spec = f.Policies[name]
	}
	p := &retry.Policy{Clock: r.opts.Clock, Observer: r.opts.Observer}
	if spec != nil && built[name] != nil {
		cp := *built[name]
		p = &cp
	}
	p.Operation = h.name
	st := handleState{h: h, p: p, spec: spec}
	r.planHedger(&st)
	return st
}

// opPolicy is an operation in use and the policy it gets (nil: none).
type opPolicy struct {
	op string
	p  *retry.Policy
	hd *hedge.Hedger // the handle's, nil for an operation with no handle
}

// stagedWatch is an operation's watchers being moved to new parts: the
// hooks have been told about the new ones (un* stop them), the old ones
// are still watched until commitWatches.
type stagedWatch struct {
	op                     string
	bud                    retry.Budget
	brk                    retry.Breaker
	lim                    retry.Limiter
	delay                  any // see opWatch.delay
	budNew, brkNew, limNew bool
	delayNew               bool
	unBud, unBrk, unLim    []func()
	unDelay                []func()
}

// stageWatches tells the watch hooks about each operation's parts that
// differ from what its watchers have now, without unwatching anything. If
// a hook panics, every watcher told so far is told to stop and the panic's
// value is returned (staged is then nil). It must be called with r.mu
// held.
func (r *Registry) stageWatches(ops []opPolicy) (staged []*stagedWatch, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			for _, s := range staged {
				r.unwatch(s.op, s.unBud)
				r.unwatch(s.op, s.unBrk)
				r.unwatch(s.op, s.unLim)
				r.unwatch(s.op, s.unDelay)
			}
			staged, panicked = nil, v
		}
	}()
	obs := r.opts.Observer
	for _, o := range ops {
		s := &stagedWatch{op: o.op}
		if o.p != nil {
			s.bud, s.brk, s.lim = o.p.Budget, o.p.Breaker, o.p.Limiter
		}
		var cur opWatch
		if w := r.watches[o.op]; w != nil {
			cur = *w
		}
		s.delay = delayOf(o.hd)
		s.budNew, s.brkNew, s.limNew = cur.budget != s.bud, cur.breaker != s.brk, cur.limiter != s.lim
		s.delayNew = cur.delay != s.delay
		staged = append(staged, s)
		if s.delayNew {
			switch d := s.delay.(type) {
			case *hedge.Adaptive:
				watchAll(o.op, d, &s.unDelay, nil, obs, func(o retry.Observer) (func(string, *hedge.Adaptive) func(), bool) {
					aw, ok := o.(AdaptiveWatcher)
					if !ok {
						return nil, false
					}
					return aw.WatchAdaptive, true
				})
			case *kg.Group[*hedge.Adaptive]:
				watchAll(o.op, d, &s.unDelay, nil, obs, func(o retry.Observer) (func(string, *kg.Group[*hedge.Adaptive]) func(), bool) {
					aw, ok := o.(AdaptivesWatcher)
					if !ok {
						return nil, false
					}
					return aw.WatchAdaptives, true
				})
			}
		}
		if s.budNew && s.bud != nil {
			watchAll(o.op, s.bud, &s.unBud, r.opts.OnBudget, obs, func(o retry.Observer) (func(string, retry.Budget) func(), bool) {
				bw, ok := o.(BudgetWatcher)
				if !ok {
					return nil, false
				}
				return bw.WatchBudget, true
			})
		}
		if s.brkNew && s.brk != nil {
			watchAll(o.op, s.brk, &s.unBrk, r.opts.OnBreaker, obs, func(o retry.Observer) (func(string, retry.Breaker) func(), bool) {
				bw, ok := o.(BreakerWatcher)
				if !ok {
					return nil, false
				}
				return bw.WatchBreaker, true
			})
		}
		if s.limNew && s.lim != nil {
			watchAll(o.op, s.lim, &s.unLim, r.opts.OnLimiter, obs, func(o retry.Observer) (func(string, retry.Limiter) func(), bool) {
				lw, ok := o.(LimiterWatcher)
				if !ok {
					return nil, false
				}
				return lw.WatchLimiter, true
			})
		}
	}
	return staged, nil
}

// commitWatches makes the staged parts the watched ones: for each part
// that changed, the old part's watchers are told to stop (after the new
// one was watched, so a scrape in between still finds one). It must be
// called with r.mu held.
func (r *Registry) commitWatches(staged []*stagedWatch) {
	for _, s := range staged {
		w := r.watches[s.op]
		if w == nil {
			if s.bud == nil && s.brk == nil && s.lim == nil && s.delay == nil {
				continue
			}
			w = &opWatch{}
			r.watches[s.op] = w
		}
		if s.budNew {
			r.unwatch(s.op, w.unBudget)
			w.budget, w.unBudget = s.bud, s.unBud
		}
		if s.brkNew {
			r.unwatch(s.op, w.unBreaker)
			w.breaker, w.unBreaker = s.brk, s.unBrk
		}
		if s.limNew {
			r.unwatch(s.op, w.unLimiter)
			w.limiter, w.unLimiter = s.lim, s.unLim
		}
		if s.delayNew {
			r.unwatch(s.op, w.unDelay)
			w.delay, w.unDelay = s.delay, s.unDelay
		}
		if w.budget == nil && w.breaker == nil && w.limiter == nil && w.delay == nil {
			delete(r.watches, s.op)
		}
	}
}

// delayOf returns the adaptive hedge delay of hd to watch: its keyed
// group, its Adaptive, or nil (untyped, so that an operation without one
// compares equal to nothing watched).
func delayOf(hd *hedge.Hedger) any {
	switch {
	case hd == nil:
		return nil
	case hd.Adaptives != nil:
		return hd.Adaptives
	case hd.Adaptive != nil:
		return hd.Adaptive
	}
	return nil
}

// unwatch calls the unwatch functions fs. One that panics is recovered and
// logged (at Error), so that the others still run and the registry stays
// consistent: by then the watched part has been replaced.
func (r *Registry) unwatch(op string, fs []func()) {
	for _, f := range fs {
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.logger().Error("config: an unwatch function panicked; recovered", "operation", op, "panic", v)
				}
			}()
			f()
		}()
	}
}

// watchAll tells hook and every observer watch finds in obs (through
// retry.EachObserver) about next, appending each unwatch function to *un
// as soon as it is returned (so a later panic can still stop it).
func watchAll[T any](op string, next T, un *[]func(), hook func(string, T) func(), obs retry.Observer, watch func(retry.Observer) (func(string, T) func(), bool)) {
	if hook != nil {
		*un = appendFunc(*un, hook(op, next))
	}
	retry.EachObserver(obs, func(o retry.Observer) {
		if f, ok := watch(o); ok {
			*un = appendFunc(*un, f(op, next))
		}
	})
}

func appendFunc(fs []func(), f func()) []func() {
	if f == nil {
		return fs
	}
	return append(fs, f)
}
