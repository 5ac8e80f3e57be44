package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// scenariosAtOnce is how many virtual scenarios run at the same time when
// --workers is 0. Each runs its trials on GOMAXPROCS goroutines; a
// scenario ends with fewer trials left than cores (and a model scenario
// waits for its reference runs before its policies' runs), so the next
// scenario runs beside it and keeps every core busy. The reports are
// still printed in order, each once its scenario has ended: the output
// is the same bytes as one scenario after another.
const scenariosAtOnce = 2

// outcome is one scenario's run: its report and error, how long it took,
// or the panic it raised.
type outcome struct {
	rep      *sim.Report
	err      error
	elapsed  time.Duration
	panicked any
	stack    []byte // where it panicked
	skip     bool   // not run: none of the asked-for policies applies
}

// ahead runs virtual scenarios ahead of the loop that reports them.
type ahead struct {
	cancel context.CancelFunc
	run    func(*sim.Scenario, context.Context, sim.Options) (*sim.Report, error)
	wg     sync.WaitGroup
	done   []chan outcome
	stderr io.Writer
	// slots holds one token per run going. One at a time (--workers set),
	// the token goes back when the report loop asks for the next
	// scenario, so that a scenario starts only once the one before has
	// been reported, as when they ran one after another; otherwise the
	// run gives it back as it ends.
	slots    chan struct{}
	oneByOne bool
	held     bool          // oneByOne: the last scenario waited for holds its token
	quit     chan struct{} // closed by stop: start no more runs
	stopOnce sync.Once

	mu   sync.Mutex // orders the progress bars' writes
	bars []*progressBar
	head int // the scenario whose bar may draw: the one being waited for
}

// runAhead starts the scenarios' runs, at most scenariosAtOnce at a time
// (one at a time with --workers set, which bounds the goroutines), in
// order. wait(i) returns scenario i's outcome; stop cancels the runs
// still going and waits for them, and must be called once the caller is
// done.
func runAhead(ctx context.Context, cfg *config, scenarios []*sim.Scenario, lists [][]string, stderr io.Writer, progress bool) *ahead {
	return startAhead(ctx, cfg, scenarios, lists, stderr, progress, (*sim.Scenario).Run)
}

// startAhead is runAhead with the function that runs a scenario.
func startAhead(ctx context.Context, cfg *config, scenarios []*sim.Scenario, lists [][]string, stderr io.Writer, progress bool,
	run func(*sim.Scenario, context.Context, sim.Options) (*sim.Report, error)) *ahead {
	ctx, cancel := context.WithCancel(ctx)
	a := &ahead{cancel: cancel, run: run, done: make([]chan outcome, len(scenarios)), bars: make([]*progressBar, len(scenarios)),
		stderr: stderr, quit: make(chan struct{})}
	for i := range a.done {
		a.done[i] = make(chan outcome, 1)
	}
	at := scenariosAtOnce
	if cfg.workers > 0 {
		at, a.oneByOne = 1, true
	}
	a.slots = make(chan struct{}, at)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for i, sc := range scenarios {
			policies := lists[i]
			if cfg.policies != "" && len(policies) == 0 {
				a.done[i] <- outcome{skip: true}
				continue
			}
			// Once ctx has ended, a run still starts: it ends at once with
			// its partial report, as it did when one ran after another.
			// Once stop was called, nobody waits for one: none starts.
			select {
			case a.slots <- struct{}{}:
			case <-a.quit:
				return
			}
			bar := newProgress(stderr, progress, sc.Name)
			a.mu.Lock()
			a.bars[i] = bar
			a.mu.Unlock()
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				if !a.oneByOne {
					defer func() { <-a.slots }()
				}
				sent := false
				defer func() {
					if !sent { // runtime.Goexit in the run: wait(i) must not block for good
						a.done[i] <- outcome{panicked: "stormsim: a scenario run called runtime.Goexit"}
					}
				}()
				a.done[i] <- a.runOne(ctx, cfg, sc, policies, i, bar)
				sent = true
			}()
		}
	}()
	return a
}

// runOne runs scenario i, its progress drawn only while it is the one
// the report loop waits for.
func (a *ahead) runOne(ctx context.Context, cfg *config, sc *sim.Scenario, policies []string, i int, bar *progressBar) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = outcome{panicked: r, stack: debug.Stack()}
		}
	}()
	t0 := time.Now()
	rep, err := a.run(sc, ctx, sim.Options{
		Seed: cfg.seed, Trials: cfg.trials, Clients: cfg.clients, Duration: cfg.duration,
		Policies: policies, Workers: cfg.workers,
		Progress: func(done, total int) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.head == i {
				bar.update(done, total)
			}
		},
	})
	return outcome{rep: rep, err: err, elapsed: time.Since(t0)}
}

// wait returns scenario i's outcome once its run has ended, erasing its
// progress bar; ok is false for a scenario that was not run (no policy
// applies). A panic of the run goes on here.
func (a *ahead) wait(i int) (outcome, bool) {
	a.mu.Lock()
	a.head = i
	a.mu.Unlock()
	if a.held {
		<-a.slots // the one before is reported: the next may start
		a.held = false
	}
	out := <-a.done[i]
	a.held = a.oneByOne && !out.skip
	a.mu.Lock()
	if b := a.bars[i]; b != nil {
		b.finish()
	}
	a.head = -1
	a.mu.Unlock()
	if out.panicked != nil {
		a.stop()
		fmt.Fprintf(a.stderr, "stormsim: scenario run panicked: %v\n%s", out.panicked, out.stack)
		panic(out.panicked)
	}
	return out, !out.skip
}

// stop cancels the runs still going, starts no more, and waits for them
// to end.
func (a *ahead) stop() {
	a.stopOnce.Do(func() { close(a.quit) })
	a.cancel()
	a.wg.Wait()
}
