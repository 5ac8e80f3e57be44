package simtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// Options adjust a Run. The zero value runs every storm over
// DefaultTrials trials with seed 0 on GOMAXPROCS goroutines.
type Options struct {
	// Seed determines every random draw: the same seed gives the same
	// report. Trial i of every storm runs with a seed derived from Seed
	// and i, the same for every policy (each policy meets the same
	// workload).
	Seed uint64
	// Storms names the storms to run (see StormNames), each once. nil or
	// empty: all.
	Storms []string
	// Trials is how many runs of each storm, with different seeds, each
	// measure is the mean of. 0: DefaultTrials; otherwise at least
	// MinTrials, at most MaxTrials.
	Trials int
	// Workers is how many runs go at once. 0 (or less): GOMAXPROCS.
	Workers int
}

// Trials: a measure is judged on the mean of at least MinTrials runs
// and its 95% interval (see Estimate).
const (
	DefaultTrials = 3
	MinTrials     = 3
	MaxTrials     = 100
)

// Estimate is a measure over the trials: their mean and its 95%
// confidence interval, mean ± t(0.975, n−1) × s/√n with s the trials'
// sample standard deviation and t Student's quantile (4.303 for 3
// trials). Low equals High equals Mean when the trials agree.
type Estimate struct {
	// Mean is the mean of the trials' values, and Low and High the ends
	// of its 95% interval (Low ≤ Mean ≤ High; a recovery time's Low is
	// floored at 0). All three are 0 over no trials.
	Mean float64 `json:"mean"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// estimate returns the Estimate of xs (the zero Estimate for none).
func estimate(xs []float64) Estimate {
	n := len(xs)
	if n == 0 {
		return Estimate{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(n)
	if n == 1 {
		return Estimate{mean, mean, mean}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	hw := StudentT95(n-1) * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	return Estimate{mean, mean - hw, mean + hw}
}

// studentT is t(0.975, df) for df = 1..30.
var studentT = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// StudentT95 returns Student's t quantile t(0.975, df), the factor of a
// two-sided 95% interval of a mean over df+1 samples: 12.706 for df 1,
// 4.303 for df 2, down to 1.96 for large df (between tabulated values
// the next smaller df's, which is the wider interval). df < 1 gives +Inf.
func StudentT95(df int) float64 {
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(studentT):
		return studentT[df-1]
	case df < 40:
		return studentT[len(studentT)-1]
	case df < 60:
		return 2.021
	case df < 120:
		return 2.000
	case df < 1000:
		return 1.980
	}
	return 1.960
}

// Trial is what one run of a storm measured.
type Trial struct {
	// Seed is the seed the trial ran with: TrialSeed(Options.Seed, i)
	// for trial i.
	Seed uint64 `json:"seed"`
	// PeakAmplification is the trial's highest offered load over any 1s
	// window divided by the fleet's call rate (see
	// StormResult.PeakAmplification); 0 in a runaway trial.
	PeakAmplification float64 `json:"peak_amplification"`
	// RecoveryS is the time the downstream took to recover after the
	// trigger ended, in seconds (sim.Metrics.RecoveryS); nil (null) when
	// it did not recover in this run, and in a runaway trial.
	RecoveryS *float64 `json:"recovery_s"`
	// SuccessStorm and SuccessRecovery are the trial's shares of the
	// calls that succeeded, of those ending while the trigger lasts and
	// of those ending after it (see StormResult.SuccessStorm); 0 in a
	// runaway trial.
	SuccessStorm    float64 `json:"success_storm"`
	SuccessRecovery float64 `json:"success_recovery"`
	// Runaway says why the trial was stopped (see StormResult.Runaway),
	// or is "" (left out) when it ran to the end.
	Runaway string `json:"runaway,omitempty"`
}

// StormResult is what one policy did in one storm, over the trials.
type StormResult struct {
	// Storm is the storm's name (Storm.Name).
	Storm string `json:"storm"`
	// Trials are the runs, each with its own seed.
	Trials []Trial `json:"trials"`
	// PeakAmplification is the highest offered load (attempts per second
	// at the downstream, over any 1s window) divided by the fleet's steady
	// call rate (Downstream.Rate): the load the calls would make with no
	// retries and no hedges, so that hedges sent in steady traffic count
	// too.
	PeakAmplification Estimate `json:"peak_amplification"`
	// MeanAmplification is the mean offered load while the trigger lasts,
	// divided by the fleet's call rate (mean over the trials).
	MeanAmplification float64 `json:"mean_amplification"`
	// RecoveredTrials is how many trials recovered after the trigger
	// ended (see sim.Metrics.RecoveryS: success rates back to 99% of the
	// baseline's for a second and the backlog drained); Recovered says
	// every trial did. RecoveryS is the time that took, in seconds, over
	// the trials: nil (null) unless every trial recovered.
	RecoveredTrials int       `json:"recovered_trials"`
	Recovered       bool      `json:"recovered"`
	RecoveryS       *Estimate `json:"recovery_s"`
	// SuccessStorm is the share of the calls ending while the trigger
	// lasts that succeeded; SuccessRecovery the same for the calls ending
	// from the trigger's end to the end of the run (where recovery is
	// judged). These are what min_success gates. SuccessRate is the share
	// of all the run's calls that succeeded (diluted by the steady part:
	// reported, not gated).
	SuccessStorm    Estimate `json:"success_storm"`
	SuccessRecovery Estimate `json:"success_recovery"`
	SuccessRate     float64  `json:"success_run"`
	// P99ms is the 99th percentile of call latency in milliseconds (mean
	// over the trials); P99Open says it fell on a call still open at the
	// end in some trial (a lower bound).
	P99ms   float64 `json:"p99_ms"`
	P99Open bool    `json:"p99_open,omitempty"`
	// AttemptsPerCall is attempts sent over calls made, over the run.
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// StormAttemptsPerCall is the attempts of the calls that started
	// while the trigger lasts, per call (sim.Metrics.FaultAttemptsPerCall;
	// in a trial where that is 0, MeanAmplification's offered load over
	// the call rate instead), mean over the trials.
	StormAttemptsPerCall float64 `json:"storm_attempts_per_call"`
	// AfterAttemptsPerCall is attempts sent over calls ended, from the end
	// of the trigger to the end of the run: well below 1 when a breaker
	// fails calls without trying the downstream.
	AfterAttemptsPerCall float64 `json:"after_attempts_per_call"`
	// StormFastFailed is the share of the calls ending while the trigger
	// lasts that ended without an attempt answered by the downstream
	// (refused by an open breaker or the limiter): 1 − attempts/calls
	// floored at 0 is its lower bound, which is what is reported.
	StormFastFailed float64 `json:"storm_fast_failed"`
	// Hedges is the hedges sent per call while the trigger lasts, and
	// HedgeLoad the share of the trigger's offered load they make up (0
	// without hedge:).
	Hedges    float64 `json:"hedges_per_call"`
	HedgeLoad float64 `json:"hedge_load_share"`
	// NotRetried is the failed attempts per call that the policy's
	// classification (retry_on, a preset) did not retry, over the run.
	NotRetried float64 `json:"not_retried_per_call"`
	// LocalRejected is the share of attempts a client-side limiter
	// refused (sim.Metrics.LocalRejected), mean over the trials.
	LocalRejected float64 `json:"local_rejected"`
	// Runaway, when set, says why a trial was stopped: the policy's
	// retries needed more than RunawayFactor times the work of steady
	// traffic (or made no progress in virtual time). Such a storm fails
	// whatever the gates, and the measures above are zero.
	Runaway string `json:"runaway,omitempty"`
	// Failures are the gates this storm failed (borderline ones included,
	// marked so).
	Failures []Failure `json:"failures,omitempty"`
	// Metrics are every measure of the first trial.
	Metrics sim.Metrics `json:"first_trial_metrics"`
	// Events is how many events the simulation processed, over the trials.
	Events uint64 `json:"events"`
	// Load is the offered load per second at ChartStep (100ms) steps,
	// mean over the trials, for charts.
	Load []float64 `json:"-"`

	observed float64 // seconds of traffic after the trigger in which recovery could show
}

// PolicyResult is what one policy did across the suite.
type PolicyResult struct {
	// Policy is the policy's label (Policy.Name).
	Policy string `json:"policy"`
	// Operation is the operation the policy was picked for
	// (Policy.Operation), or "" (left out).
	Operation string `json:"operation,omitempty"`
	// Storms are the policy's results, one per storm run, in the order
	// of Report.Storms.
	Storms []StormResult `json:"storms"`
	// Weakest names the policy's weakest point in one sentence, derived
	// from the measured figures.
	Weakest string `json:"weakest"`
	// Notes are settings the simulator models only in part.
	Notes []string `json:"notes,omitempty"`
	// Pass says the policy passed every storm: no failure, or only
	// borderline ones under Gates.PassBorderline.
	Pass bool `json:"pass"`
}

// ModelVersion names the check's model (storms, trials, measures,
// failure kinds): reports of the same ModelVersion are comparable.
const ModelVersion = "check/2"

// Report is the result of a check.
type Report struct {
	// ModelVersion is the check model's (see ModelVersion); ToolVersion
	// the version of the stormsim binary (its module version, or
	// "devel").
	ModelVersion string `json:"model_version"`
	ToolVersion  string `json:"tool_version"`
	// File and Version name the policy file checked and its version
	// field (stormsim check sets them; empty, and left out, from Run and
	// Check).
	File    string `json:"file,omitempty"`
	Version string `json:"version,omitempty"`
	// Seed is the run's seed (Options.Seed): trial i of every storm ran
	// with TrialSeed(Seed, i).
	Seed uint64 `json:"seed"`
	// Trials is how many trials each storm ran (Options.Trials, or
	// DefaultTrials).
	Trials int `json:"trials"`
	// Downstream is the model, defaults filled in.
	Downstream DownstreamReport `json:"downstream"`
	// Gates are the limits the results were judged by, defaults filled
	// in.
	Gates GatesReport `json:"gates"`
	// Storms describe the storms run, in the order Options.Storms names
	// them (the suite's order, Storms(), when it names none).
	Storms []StormInfo `json:"storms"`
	// Policies are the policies' results, in the order Run was given
	// them.
	Policies []PolicyResult `json:"policies"`
	// Failures lists every failed gate, policy by policy (borderline ones
	// included, marked so); empty, not null, when there is none.
	Failures []Failure `json:"failures"`
	// Pass says every policy passed: no failure, or only borderline ones
	// under Gates.PassBorderline.
	Pass bool `json:"pass"`
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
	trials := o.Trials
	if trials == 0 {
		trials = DefaultTrials
	}
	if trials < MinTrials || trials > MaxTrials {
		return nil, fmt.Errorf("simtest: trials must be in [%d, %d], got %d", MinTrials, MaxTrials, o.Trials)
	}
	type unit struct{ p, s, t int }
	feats := make([]features, len(policies))
	for i, p := range policies {
		var end func()
		_, feats[i], end = simPolicy(p, storms[0], &runCounts{})
		end()
	}
	runs := make([][][]trialRun, len(policies))
	for i := range runs {
		runs[i] = make([][]trialRun, len(storms))
		for j := range runs[i] {
			runs[i][j] = make([]trialRun, trials)
		}
	}
	units := make(chan unit)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(policies)*len(storms)*trials)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg        sync.WaitGroup
		errOnce   sync.Once
		firstErr  error
		panicOnce sync.Once
		panicked  any
		didPanic  bool
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A panicking callback (Policy.New, a strategy, a budget)
				// stops every run, and is raised again on Run's caller.
				if r := recover(); r != nil {
					panicOnce.Do(func() { panicked, didPanic = r, true })
					cancel()
					for range units { // let the feed finish
					}
				}
			}()
			for u := range units {
				r, err := runOne(ctx, policies[u.p], d, storms[u.s], TrialSeed(o.Seed, u.t))
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("%w: policy %s, storm %s: %w", ErrRun, policies[u.p].Name, storms[u.s].Name, err)
					})
					cancel()
					continue
				}
				runs[u.p][u.s][u.t] = r
			}
		}()
	}
feed:
	for p := range policies {
		for s := range storms {
			for t := range trials {
				select {
				case units <- unit{p, s, t}:
				case <-ctx.Done():
					break feed
				}
			}
		}
	}
	close(units)
	wg.Wait()
	if didPanic {
		panic(panicked)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rep := &Report{ModelVersion: ModelVersion, ToolVersion: toolVersion(), Seed: o.Seed, Trials: trials,
		Downstream: d.json(), Gates: g.json(), Pass: true, Failures: []Failure{}}
	for _, s := range storms {
		rep.Storms = append(rep.Storms, StormInfo{Name: s.Name, Title: s.Title, Doc: s.Doc,
			StartS: stormStart.Seconds(), EndS: (stormStart + s.Length).Seconds()})
	}
	for i, p := range policies {
		pr := PolicyResult{Policy: p.Name, Operation: p.Operation, Notes: feats[i].notes, Pass: true}
		for j, s := range storms {
			r := combine(s, d, runs[i][j])
			r.Failures = judge(p.Name, &r, g.For(r.Storm))
			if failing(r.Failures, g.PassBorderline) {
				pr.Pass, rep.Pass = false, false
			}
			rep.Failures = append(rep.Failures, r.Failures...)
			pr.Storms = append(pr.Storms, r)
		}
		pr.Weakest = weakest(feats[i], storms, pr.Storms)
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

// TrialSeed is the seed of trial i (from 0) of a check run with seed.
func TrialSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return seed
	}
	z := seed + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// failing reports whether fs holds a failure that fails the policy:
// any, unless passBorderline lets the borderline ones through.
func failing(fs []Failure, passBorderline bool) bool {
	for _, f := range fs {
		if !f.Borderline || !passBorderline {
			return true
		}
	}
	return false
}

// toolVersion is the module version of the running binary, or "devel".
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// trialRun is one trial's measures.
type trialRun struct {
	seed                      uint64
	peak, mean                float64
	recovered                 bool
	recoveryS                 float64
	successRun, successStorm  float64
	successRecovery           float64
	p99                       float64
	p99Open                   bool
	apc, stormAPC, afterAPC   float64
	stormCalls, stormAttempts float64
	hedges, stormHedges       float64
	notRetried, localRejected float64
	runaway                   string
	metrics                   sim.Metrics
	load                      []float64
	events                    uint64
}

// combine folds the trials of storm s into its StormResult.
func combine(s Storm, d Downstream, ts []trialRun) StormResult {
	r := StormResult{Storm: s.Name, Metrics: ts[0].metrics, observed: (stormDuration - stormStart - s.Length).Seconds()}
	var peaks, recs, succS, succR []float64
	n := float64(len(ts))
	for _, t := range ts {
		tr := Trial{Seed: t.seed, PeakAmplification: t.peak, SuccessStorm: t.successStorm, SuccessRecovery: t.successRecovery, Runaway: t.runaway}
		r.Events += t.events
		if t.runaway != "" {
			if r.Runaway == "" {
				r.Runaway = t.runaway
			}
			r.Trials = append(r.Trials, tr)
			continue
		}
		if t.recovered {
			v := t.recoveryS
			tr.RecoveryS = &v
			r.RecoveredTrials++
			recs = append(recs, v)
		}
		r.Trials = append(r.Trials, tr)
		peaks, succS, succR = append(peaks, t.peak), append(succS, t.successStorm), append(succR, t.successRecovery)
		r.MeanAmplification += t.mean / n
		r.SuccessRate += t.successRun / n
		r.P99ms += t.p99 / n
		r.P99Open = r.P99Open || t.p99Open
		r.AttemptsPerCall += t.apc / n
		r.StormAttemptsPerCall += t.stormAPC / n
		r.AfterAttemptsPerCall += t.afterAPC / n
		r.LocalRejected += t.localRejected / n
		if t.stormCalls > 0 {
			r.StormFastFailed += max(0, 1-t.stormAttempts/t.stormCalls) / n
			r.Hedges += t.stormHedges / t.stormCalls / n
		}
		if t.stormAttempts > 0 {
			r.HedgeLoad += t.stormHedges / t.stormAttempts / n
		}
		if calls := t.metrics.Calls; calls > 0 {
			r.NotRetried += t.notRetried / calls / n
		}
		if len(r.Load) < len(t.load) {
			r.Load = append(r.Load, make([]float64, len(t.load)-len(r.Load))...)
		}
		for i, v := range t.load {
			r.Load[i] += v / n
		}
	}
	if r.Runaway != "" {
		return StormResult{Storm: s.Name, Trials: r.Trials, Runaway: r.Runaway, Events: r.Events, observed: r.observed}
	}
	r.PeakAmplification = estimate(peaks)
	r.SuccessStorm, r.SuccessRecovery = estimate(succS), estimate(succR)
	r.Recovered = r.RecoveredTrials == len(ts)
	if r.Recovered {
		e := estimate(recs)
		e.Low = max(e.Low, 0)
		r.RecoveryS = &e
	}
	return r
}

// runOne runs policy p in storm s against the resolved downstream d, one
// trial with seed.
func runOne(ctx context.Context, p Policy, d Downstream, s Storm, seed uint64) (trialRun, error) {
	m := d.model(s)
	if err := m.CheckBaseline(); err != nil {
		return trialRun{}, err
	}
	counts := &runCounts{from: stormStart, to: stormStart + s.Length}
	sp, _, end := simPolicy(p, s, counts)
	defer end() // the run's shared parts go with it
	res, err := sim.RunContext(ctx, &m, sim.Single(sp), seed)
	if errors.Is(err, sim.ErrNoProgress) && ctx.Err() == nil {
		return trialRun{seed: seed, runaway: err.Error()}, nil
	}
	if err != nil {
		return trialRun{}, err
	}
	mt := res.Metrics
	r := trialRun{
		seed:          seed,
		peak:          mt.PeakLoad / d.Rate,
		recovered:     mt.Recovered > 0,
		recoveryS:     mt.RecoveryS,
		successRun:    mt.SuccessRate,
		p99:           mt.P99ms,
		p99Open:       mt.P99Open > 0,
		apc:           mt.AttemptsPerCall,
		localRejected: mt.LocalRejected,
		metrics:       mt,
		load:          res.Series.Load,
		events:        res.Events,
		hedges:        counts.hedges,
		stormHedges:   counts.stormHedges,
		notRetried:    counts.notRetried,
	}
	step := sim.ChartStep
	window := func(from, to time.Duration) (att, ok, failed float64) {
		i, j := int(from/step), min(int(to/step), len(res.Series.Load))
		for k := i; k < j; k++ {
			att += res.Series.Load[k] * step.Seconds()
			ok += res.Series.Goodput[k] * step.Seconds()
			failed += res.Series.Failed[k] * step.Seconds()
		}
		return att, ok, failed
	}
	trig := stormStart + s.Length
	att, ok, failed := window(stormStart, trig)
	r.stormAttempts, r.stormCalls = att, ok+failed
	if ok+failed > 0 {
		r.successStorm = ok / (ok + failed)
	}
	if secs := s.Length.Seconds(); secs > 0 {
		r.mean = att / secs / d.Rate
		r.stormAPC = r.mean
	}
	if mt.FaultAttemptsPerCall > 0 {
		// Exact: the attempts of the calls that started in the storm,
		// per call, rather than the load over the nominal rate.
		r.stormAPC = mt.FaultAttemptsPerCall
	}
	att, ok, failed = window(trig, stormDuration)
	if ok+failed > 0 {
		r.successRecovery = ok / (ok + failed)
		r.afterAPC = att / (ok + failed)
	}
	return r, nil
}
