package simtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/stormguard/stormguard/sim"
)

// Options adjust a Run. The zero value runs every storm with seed 0 on
// GOMAXPROCS goroutines.
type Options struct {
	// Seed determines every random draw: the same seed gives the same
	// report.
	Seed uint64
	// Storms names the storms to run (see StormNames). nil: all.
	Storms []string
	// Workers is how many runs go at once. 0: GOMAXPROCS.
	Workers int
}

// StormResult is what one policy did in one storm.
type StormResult struct {
	Storm string `json:"storm"`
	// PeakAmplification is the highest offered load (attempts per second
	// at the downstream, over any 1s window) divided by the baseline
	// load, the steady load before the trigger.
	PeakAmplification float64 `json:"peak_amplification"`
	// MeanAmplification is the mean offered load while the trigger lasts,
	// divided by the baseline load.
	MeanAmplification float64 `json:"mean_amplification"`
	// Recovered says whether the downstream recovered after the trigger
	// ended; RecoveryS is how long that took, in seconds (see
	// sim.Metrics.RecoveryS: success rates back to 99% of the baseline's
	// for a second and the backlog drained).
	Recovered bool    `json:"recovered"`
	RecoveryS float64 `json:"recovery_s"`
	// SuccessRate is the share of the run's calls that succeeded.
	SuccessRate float64 `json:"success_rate"`
	// P99ms is the 99th percentile of call latency in milliseconds;
	// P99Open says it fell on a call still open at the end (a lower bound).
	P99ms   float64 `json:"p99_ms"`
	P99Open bool    `json:"p99_open,omitempty"`
	// AttemptsPerCall is attempts sent over calls made, over the run.
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// StormAttemptsPerCall is the same while the trigger lasts: offered
	// load over the baseline's call rate.
	StormAttemptsPerCall float64 `json:"storm_attempts_per_call"`
	// AfterAttemptsPerCall is attempts sent over calls ended, from the end
	// of the trigger to the end of the run: well below 1 when a breaker
	// fails calls without trying the downstream.
	AfterAttemptsPerCall float64 `json:"after_attempts_per_call"`
	// Runaway, when set, says why the run was stopped: the policy's
	// retries needed more than RunawayFactor times the work of steady
	// traffic (or made no progress in virtual time). Such a storm fails
	// whatever the gates, and the measures above are zero.
	Runaway string `json:"runaway,omitempty"`
	// Failures are the gates this run failed.
	Failures []Failure `json:"failures,omitempty"`
	// Metrics are every measure of the run.
	Metrics sim.Metrics `json:"metrics"`
	// Events is how many events the simulation processed.
	Events uint64 `json:"events"`
	// Load is the offered load per second at ChartStep (100ms) steps, for
	// charts.
	Load []float64 `json:"-"`

	observed float64 // seconds of traffic after the trigger in which recovery could show
}

// PolicyResult is what one policy did across the suite.
type PolicyResult struct {
	Policy    string        `json:"policy"`
	Operation string        `json:"operation,omitempty"`
	Storms    []StormResult `json:"storms"`
	// Weakest names the policy's weakest point in one sentence.
	Weakest string `json:"weakest"`
	// Notes are settings the simulator does not model.
	Notes []string `json:"notes,omitempty"`
	Pass  bool     `json:"pass"`
}

// Report is the result of a check.
type Report struct {
	// File and Version name the policy file (empty for Check).
	File    string `json:"file,omitempty"`
	Version string `json:"version,omitempty"`
	Seed    uint64 `json:"seed"`
	// Downstream is the model, defaults filled in.
	Downstream DownstreamReport `json:"downstream"`
	Gates      GatesReport      `json:"gates"`
	Storms     []StormInfo      `json:"storms"`
	Policies   []PolicyResult   `json:"policies"`
	// Failures lists every failed gate, policy by policy.
	Failures []Failure `json:"failures"`
	Pass     bool      `json:"pass"`
}

// ErrRun is wrapped by the error of a run the simulator refused or could
// not finish (a model or policy that makes no progress).
var ErrRun = errors.New("simtest: the run failed")

// Run runs every policy in every storm of the suite against d, judges the
// results by g, and reports. It returns an error (and no report) when d or
// g is invalid, when the simulator refuses a run, or when ctx ends.
func Run(ctx context.Context, policies []Policy, d Downstream, g Gates, o Options) (*Report, error) {
	if len(policies) == 0 {
		return nil, errors.New("simtest: no policy to check")
	}
	d, err := d.Resolve()
	if err != nil {
		return nil, err
	}
	if err := g.validate(); err != nil {
		return nil, fmt.Errorf("simtest: invalid gates: %w", err)
	}
	storms, err := pickStorms(o.Storms)
	if err != nil {
		return nil, fmt.Errorf("simtest: %w", err)
	}
	type unit struct{ p, s int }
	sims := make([]sim.Policy, len(policies))
	feats := make([]features, len(policies))
	for i, p := range policies {
		sims[i], feats[i] = simPolicy(p)
	}
	results := make([][]StormResult, len(policies))
	for i := range results {
		results[i] = make([]StormResult, len(storms))
	}
	units := make(chan unit)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(policies)*len(storms))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range units {
				r, err := runOne(ctx, sims[u.p], d, storms[u.s], o.Seed)
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("%w: policy %s, storm %s: %w", ErrRun, policies[u.p].Name, storms[u.s].Name, err)
					})
					cancel()
					continue
				}
				results[u.p][u.s] = r
			}
		}()
	}
feed:
	for p := range policies {
		for s := range storms {
			select {
			case units <- unit{p, s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(units)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rep := &Report{Seed: o.Seed, Downstream: d.json(), Gates: g.json(), Pass: true, Failures: []Failure{}}
	for _, s := range storms {
		rep.Storms = append(rep.Storms, StormInfo{Name: s.Name, Title: s.Title, Doc: s.Doc,
			StartS: stormStart.Seconds(), EndS: (stormStart + s.Length).Seconds()})
	}
	for i, p := range policies {
		pr := PolicyResult{Policy: p.Name, Operation: p.Operation, Storms: results[i], Notes: feats[i].notes, Pass: true}
		for j := range pr.Storms {
			r := &pr.Storms[j]
			r.Failures = judge(p.Name, r, g.For(r.Storm))
			if len(r.Failures) > 0 {
				pr.Pass, rep.Pass = false, false
				rep.Failures = append(rep.Failures, r.Failures...)
			}
		}
		pr.Weakest = weakest(feats[i], storms, pr.Storms)
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

// runOne runs policy p in storm s against the resolved downstream d.
func runOne(ctx context.Context, p sim.Policy, d Downstream, s Storm, seed uint64) (StormResult, error) {
	m := d.model(s)
	if err := m.CheckBaseline(); err != nil {
		return StormResult{}, err
	}
	res, err := sim.RunContext(ctx, &m, sim.Single(p), seed)
	if errors.Is(err, sim.ErrNoProgress) && ctx.Err() == nil {
		return StormResult{Storm: s.Name, Runaway: err.Error()}, nil
	}
	if err != nil {
		return StormResult{}, err
	}
	mt := res.Metrics
	r := StormResult{
		Storm:             s.Name,
		PeakAmplification: mt.Amplification,
		Recovered:         mt.Recovered > 0,
		RecoveryS:         mt.RecoveryS,
		SuccessRate:       mt.SuccessRate,
		P99ms:             mt.P99ms,
		P99Open:           mt.P99Open > 0,
		AttemptsPerCall:   mt.AttemptsPerCall,
		Metrics:           mt,
		Load:              res.Series.Load,
		Events:            res.Events,
		observed:          (stormDuration - stormStart - s.Length).Seconds(),
	}
	if !r.Recovered {
		r.RecoveryS = 0
	}
	step := sim.ChartStep
	from, to := int(stormStart/step), int((stormStart+s.Length)/step)
	to = min(to, len(res.Series.Load))
	if from < to && mt.BaselineLoad > 0 {
		var sum float64
		for _, v := range res.Series.Load[from:to] {
			sum += v
		}
		mean := sum / float64(to-from)
		r.MeanAmplification = mean / mt.BaselineLoad
		r.StormAttemptsPerCall = mean / d.Rate
	}
	if mt.FaultAttemptsPerCall > 0 {
		// Exact: the attempts of the calls that started in the storm,
		// per call, rather than the load over the nominal rate.
		r.StormAttemptsPerCall = mt.FaultAttemptsPerCall
	}
	from, to = int((stormStart+s.Length)/step), min(int(stormDuration/step), len(res.Series.Load))
	var att, calls float64
	for i := from; i < to; i++ {
		att += res.Series.Load[i]
		calls += res.Series.Goodput[i] + res.Series.Failed[i]
	}
	if calls > 0 {
		r.AfterAttemptsPerCall = att / calls
	}
	return r, nil
}
