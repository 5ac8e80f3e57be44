package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario is a named experiment comparing policies on one seeded
// workload. The built-in ones are listed by Scenarios; NewModelScenario
// makes one from a Model (the stormsim command does so for scenario files).
type Scenario struct {
	// Name is what the command line calls it ("aws-occ").
	Name string
	// Title is a one-line summary.
	Title string
	// Doc describes the model and what the scenario shows.
	Doc string
	// Policies is the default set of policies compared.
	Policies []string
	// Trials is the default number of trials per case and policy.
	Trials int

	run   func(ctx context.Context, o *Options) (*Report, error)
	known func(string) bool // the policies it accepts (nil: the standard ones)
	own   func(string) bool // its own policy names, which shadow aliases
}

// Options adjust a scenario run. Zero fields take the scenario's defaults.
type Options struct {
	// Seed determines every random draw of the run.
	Seed uint64
	// Trials per case and policy.
	Trials int
	// Clients overrides the number of clients.
	Clients int
	// Duration overrides how long clients start calls (model scenarios).
	Duration time.Duration
	// Policies selects the policies compared, by name (ParsePolicyList).
	Policies []string
	// Workers is how many goroutines run trials. 0: GOMAXPROCS.
	Workers int
	// Progress, if set, is called from the calling goroutine after each
	// finished unit of work (one trial of one policy in one case).
	Progress func(done, total int)
}

// ErrScenario is wrapped by errors about scenario names and options.
var ErrScenario = errors.New("sim: invalid scenario")

// ErrIgnoredOption is wrapped (with ErrScenario) by the error of a run
// given an option its scenario has no use for, such as a duration for the
// aws-occ model, which runs until every client has written: the option
// is refused rather than silently ignored.
var ErrIgnoredOption = errors.New("sim: option not used by this scenario")

// KnownPolicy reports whether the scenario accepts name as a policy: one
// of the standard names (or an alias) that apply to it, or one of its own.
func (sc *Scenario) KnownPolicy(name string) bool {
	if sc.known != nil {
		return sc.known(name)
	}
	_, ok := CanonicalPolicy(name)
	return ok
}

// canonical returns the standard name for name unless the scenario has a
// policy of its own by that name.
func (sc *Scenario) canonical(name string) string {
	if sc.own != nil && sc.own(name) {
		return name
	}
	if c, ok := CanonicalPolicy(name); ok {
		return c
	}
	return name
}

// Run runs the scenario. If ctx ends first, Run stops the trials under way
// and returns ctx's error with a report marked Partial, built from the
// trials that finished (or nil when the scenario cannot report partly).
func (sc *Scenario) Run(ctx context.Context, o Options) (*Report, error) {
	if o.Trials < 0 || o.Trials > 1_000_000 {
		return nil, fmt.Errorf("%w: trials must be in [1, 1000000], got %d", ErrScenario, o.Trials)
	}
	if o.Clients < 0 || o.Duration < 0 {
		return nil, fmt.Errorf("%w: clients and duration must not be negative", ErrScenario)
	}
	if o.Trials == 0 {
		o.Trials = max(sc.Trials, 1)
	}
	if len(o.Policies) == 0 {
		o.Policies = sc.Policies
	}
	names := make([]string, 0, len(o.Policies))
	for _, p := range o.Policies {
		if !sc.KnownPolicy(p) {
			return nil, fmt.Errorf("%w: scenario %s has no policy %q", ErrPolicy, sc.Name, p)
		}
		if c := sc.canonical(p); !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	o.Policies = names
	rep, err := sc.run(ctx, &o)
	if rep == nil {
		return nil, err
	}
	rep.Scenario = sc.Name
	rep.ModelVersion = ModelVersion
	if rep.Title == "" {
		rep.Title = sc.Title
	}
	if rep.Description == "" {
		rep.Description = sc.Doc
	}
	rep.Seed, rep.Trials = o.Seed, o.Trials
	return rep, err
}

// TrialSeed is the seed Scenario.Run gives trial trial of case c of a run
// seeded with seed (Run's seed argument). The live lab starts its calls
// from TrialSeed(seed, 0, 0), so that a live run and the first trial of a
// virtual one meet the same workload.
func TrialSeed(seed uint64, c, trial int) uint64 { return unitSeed(seed, c, trial) }

// unitSeed derives the seed of one trial of one case. Every policy gets
// the same seed, so every policy meets the same workload.
func unitSeed(seed uint64, c, trial int) uint64 {
	return splitmix(splitmix(seed^uint64(c)*0xd1b54a32d192ed03) ^ uint64(trial)*0x9e3779b97f4a7c15)
}

// jobPanic carries a job's panic value to the calling goroutine.
type jobPanic struct{ v any }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// parallel runs job(0) … job(n-1) on workers goroutines, calling progress
// from the calling goroutine as jobs finish. It stops handing out jobs when
// ctx ends or a job fails, waits for the running ones, and returns the
// first error. A job that panics (a policy's budget, breaker or limiter
// code, say) stops the others as a failure does, and once they have
// ended the panic goes on in the calling goroutine; so does a panic of
// progress, once the workers have ended.
func parallel(ctx context.Context, workers, n int, progress func(done, total int), job func(i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		stop     atomic.Bool
		panicked atomic.Pointer[jobPanic]
	)
	finished := make(chan struct{}, max(workers, 1))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					panicked.CompareAndSwap(nil, &jobPanic{r})
					stop.Store(true)
				}
			}()
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if ctx.Err() != nil {
					return
				}
				if err := job(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				finished <- struct{}{}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(finished)
	}()
	done := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				// progress panicked: let the workers end, then go on.
				stop.Store(true)
				for range finished {
				}
				panic(r)
			}
		}()
		for range finished {
			done++
			if progress != nil {
				progress(done, n)
			}
		}
	}()
	if p := panicked.Load(); p != nil {
		panic(p.v)
	}
	// A trial cut short by ctx returns ctx's error: report the
	// cancellation itself, whether or not every job was handed out.
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}
