package sim

import (
	"encoding/json"
	"fmt"
	"time"
)

// Windows used by the metric definitions.
const (
	// PeakWindow is the sliding window over which peak load is measured
	// (it slides one bucket at a time).
	PeakWindow = time.Second
	// RecoveryHold is how long success must hold for the system to count
	// as recovered.
	RecoveryHold = time.Second
	// SpikeWindow is the neighbourhood a bucket of retries is compared with
	// to decide whether it is a synchronized spike.
	SpikeWindow = time.Second
	// SpikeFactor and SpikeMin: a bucket is a spike when it holds at least
	// SpikeFactor times the mean per bucket of its SpikeWindow, and at least
	// SpikeMin retries.
	SpikeFactor = 4
	SpikeMin    = 5
	// RecoveryRatio is the share of the baseline success rate that counts
	// as recovered.
	RecoveryRatio = 0.99
	// RecoveryQueueShare is the queue, as a share of the measured tier's
	// workers, that may stand above the baseline's longest queue for the
	// backlog to count as drained: a queue of half the workers waits about
	// half a service time.
	RecoveryQueueShare = 0.5
	// ChartStep is the resolution of Result.Series.
	ChartStep = 100 * time.Millisecond
)

// Metrics is what a run measured, or the mean over trials of several runs
// (see Mean). "The measured tier" is Model.Measure; "calls" are the
// clients' calls (end to end); attempts are attempts sent to the measured
// tier. All rates are per second of virtual time.
type Metrics struct {
	// Trials is the number of runs the figures are the mean of (1 for
	// one run).
	Trials int `json:"trials,omitempty"`
	// Calls the clients started, and how many succeeded (calls still open
	// when the run ends count as failed).
	Calls     float64 `json:"calls"`
	Succeeded float64 `json:"succeeded"`
	// SuccessRate is Succeeded / Calls: the share of calls that succeeded
	// by the end of the run, the drain after Duration included.
	SuccessRate float64 `json:"success_rate"`
	// SuccessInRun is the share of calls that succeeded before Duration,
	// while the clients were still starting calls: a server that serves
	// nothing for most of the run and catches up in the drain has a high
	// SuccessRate but a low SuccessInRun.
	SuccessInRun float64 `json:"success_in_run"`
	// Goodput is the calls that succeeded before Duration per second of
	// Duration: the rate of useful work over the time it covers (the
	// successes of the drain are not spread over the run).
	Goodput float64 `json:"goodput_per_s"`
	// Attempts (the work) sent to the measured tier, first tries and
	// retries; Retries of them.
	Attempts float64 `json:"attempts"`
	Retries  float64 `json:"retries"`
	// AttemptsPerCall is Attempts / Calls: 1 without retries; in a chain
	// of tiers, the load multiplier on the measured tier.
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// FaultAttemptsPerCall is the load multiplier during the fault: the
	// attempts at the measured tier caused by the client calls that
	// started inside the fault window (FaultWindow), through every tier
	// in between, divided by those calls. With every attempt failing it
	// is the product of the attempts each hop makes (4x4x4 = 64 for
	// three hops of four attempts). 0 without a fault, or when not
	// measured (live runs).
	FaultAttemptsPerCall float64 `json:"fault_attempts_per_call,omitempty"`
	// FaultTierAttemptsPerCall is the amplification at every tier of a
	// chain, outermost first: attempts reaching tier k caused by the
	// client calls that started inside the fault window, divided by those
	// calls (FaultAttemptsPerCall is the measured tier's entry). nil for
	// one tier, without a fault, or when not measured.
	FaultTierAttemptsPerCall TierRates `json:"fault_tier_attempts_per_call,omitzero"`
	// LocalRejected is the share of the requests towards the measured
	// tier (attempts sent plus attempts refused) that a client-side
	// limiter (Policy.Limiter) refused locally, before they cost the
	// tier anything. 0 without a limiter.
	LocalRejected float64 `json:"local_rejected,omitempty"`
	// BaselineLoad is attempts per second in the baseline window (after
	// Warmup, before the first fault).
	BaselineLoad float64 `json:"baseline_load_per_s"`
	// PeakLoad is the highest attempts-per-second rate over any PeakWindow
	// (1s) window of the run, sliding by one bucket (10ms).
	PeakLoad float64 `json:"peak_load_per_s"`
	// Amplification is PeakLoad / BaselineLoad for one run measured on
	// its own (Recording.Metrics, the live lab). In a scenario's report it
	// is PeakLoad / ReferenceLoad: every policy of a case is measured
	// against the same baseline, so that what a policy adds in steady
	// state (hedging above all) shows in its peak.
	Amplification float64 `json:"amplification"`
	// ReferenceLoad is, in a scenario's report, the baseline load (the
	// same window as BaselineLoad) of the case's reference run: the same
	// workload and trial seed with no fault and no retries. 0 otherwise.
	ReferenceLoad float64 `json:"reference_load_per_s,omitempty"`
	// SteadyLoad is BaselineLoad / ReferenceLoad: the load the policy
	// sends before any fault, against the reference's. Above 1 by what
	// it adds in steady state: hedges (a hedge after a fixed 10ms, behind
	// a 1% heavy tail, adds about 38%), or retries of failures that
	// happen without a fault. 0 without a reference.
	SteadyLoad float64 `json:"steady_load,omitempty"`
	// AmplificationCI and SuccessCI are, for a mean over several trials,
	// the half-widths of the 95% confidence intervals of Amplification and
	// SuccessRate (CIHalfWidth: Student's t for the number of trials, 4.303
	// standard errors for 3); 0 for one trial.
	AmplificationCI float64 `json:"amplification_ci,omitempty"`
	SuccessCI       float64 `json:"success_ci,omitempty"`
	// PeakLoadAfter is PeakLoad over the windows that start at or after
	// the end of the last fault: the peak of arrivals once the server is
	// back, apart from the fault itself (during which, for instance, 503s
	// return at once and immediate retries pile up). AmplificationAfter
	// is PeakLoadAfter over the baseline Amplification divides by. 0
	// without a fault.
	PeakLoadAfter      float64 `json:"peak_load_after_fault_per_s,omitempty"`
	AmplificationAfter float64 `json:"amplification_after_fault,omitempty"`
	// Reports counts the records the clients offered to their report
	// queues (Model.Reports), and the shares of them delivered, delivered
	// late (after a delivery that gave up had put them back), dropped by a
	// full buffer, and still pending when the run ended. Calls are then
	// deliveries. 0 without a report queue.
	Reports          float64 `json:"reports,omitempty"`
	ReportsDelivered float64 `json:"reports_delivered,omitempty"`
	ReportsDelayed   float64 `json:"reports_delayed,omitempty"`
	ReportsDropped   float64 `json:"reports_dropped,omitempty"`
	ReportsPending   float64 `json:"reports_pending,omitempty"`
	// PeakConcurrency is the most requests inside the measured tier at once
	// (in service plus queued); PeakQueue the longest queue.
	PeakConcurrency float64 `json:"peak_concurrency"`
	PeakQueue       float64 `json:"peak_queue"`
	// PeakInFlight is the most attempts in flight towards the measured tier
	// at once, as the callers see them: open connections.
	PeakInFlight float64 `json:"peak_in_flight"`
	// Recovered is 1 when the system recovered after the last fault ended
	// (or there was no fault), else 0; a mean over trials is the share
	// that recovered.
	Recovered float64 `json:"recovered"`
	// Unobserved is 1 when the run did not recover but its traffic ended
	// too soon after the last fault to call it stuck: less than
	// StuckWindow(Model.RecoveryTolerance) (the tolerance + StuckMargin,
	// 20s by default) after the fault (Recovered is then 0, and the table
	// says "unobserved", never "stuck"); a mean over trials is the share
	// of such trials.
	Unobserved float64 `json:"recovery_unobserved,omitempty"`
	// RecoveryS is the time in seconds from the end of the last fault to
	// the first instant T such that, over [T, T+RecoveryHold) (1s), both
	// the share of client calls ending in success and the share of
	// attempts to the measured tier ending in success are at least
	// RecoveryRatio (99%) of their baseline values (a window in which no
	// call or no attempt ends does not qualify), and the measured tier's
	// queue stays no longer than the longest queue of the baseline window
	// plus Recording.QueueSlack, RecoveryQueueShare of its workers (the
	// backlog is drained; see RecoveryTimeSlack). The judgement uses the
	// model's buckets (10ms by default) and only windows that end by
	// Duration. A mean over trials averages the trials that recovered.
	RecoveryS float64 `json:"recovery_s"`
	// Latency percentiles of client calls (successful or not), in
	// milliseconds, by nearest rank.
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	P999ms float64 `json:"p999_ms"`
	// OpenCalls counts the client calls still open at the end of the run.
	// The percentiles count them, each with its age at the end as a lower
	// bound of its latency; P50Open, P99Open and P999Open are 1 when the
	// percentile fell on such a call (the table then shows "> value"), and
	// a mean over trials is the share of trials where it did.
	OpenCalls float64 `json:"open_calls,omitempty"`
	P50Open   float64 `json:"p50_open,omitempty"`
	P99Open   float64 `json:"p99_open,omitempty"`
	P999Open  float64 `json:"p999_open,omitempty"`
	// SyncShare is the share of retries (to the measured tier, by the time
	// they are sent) that fall in synchronized spikes: buckets (10ms) that
	// hold at least SpikeMin (5) retries and at least SpikeFactor (4) times
	// the mean retries per bucket over the SpikeWindow (1s) centred on the
	// bucket. Retries spread by jitter score near 0; retries in lockstep
	// near 1. 0 without retries.
	SyncShare float64 `json:"sync_share"`
	// Kurtosis is the Pearson kurtosis m4/m2² of the offered-load series
	// (attempts per bucket, over Duration): much higher than
	// KurtosisPoisson for load concentrated in spikes. 0 for a constant
	// series.
	Kurtosis float64 `json:"kurtosis"`
	// KurtosisPoisson is the kurtosis a Poisson stream of the same mean
	// would have, 3 + 1/λ with λ the mean attempts per bucket: steady
	// random load at low rates has kurtosis well above 3, so Kurtosis is
	// judged against this, not against 3.
	KurtosisPoisson float64 `json:"kurtosis_poisson,omitempty"`
}

// TierRates holds one value per tier of a chain, outermost first (at most
// 16, the tiers a Model may have). It is comparable, so Metrics is, and
// its JSON is an array of Len numbers; the zero TierRates has none.
type TierRates struct {
	n uint8
	v [16]float64
}

// NewTierRates returns the TierRates holding vs (at most 16: the rest are
// dropped).
func NewTierRates(vs ...float64) TierRates {
	var t TierRates
	t.n = uint8(copy(t.v[:], vs))
	return t
}

// Len returns the number of tiers held.
func (t TierRates) Len() int { return int(t.n) }

// At returns tier i's value (0 beyond Len).
func (t TierRates) At(i int) float64 {
	if i < 0 || i >= int(t.n) {
		return 0
	}
	return t.v[i]
}

// Slice returns the values as a new slice (nil when there are none).
func (t TierRates) Slice() []float64 {
	if t.n == 0 {
		return nil
	}
	return append([]float64(nil), t.v[:t.n]...)
}

// MarshalJSON writes the values as a JSON array.
func (t TierRates) MarshalJSON() ([]byte, error) { return json.Marshal(t.v[:t.n]) }

// UnmarshalJSON reads a JSON array of at most 16 numbers.
func (t *TierRates) UnmarshalJSON(b []byte) error {
	var vs []float64
	if err := json.Unmarshal(b, &vs); err != nil {
		return err
	}
	if len(vs) > len(t.v) {
		return fmt.Errorf("sim: %d tier values, at most %d", len(vs), len(t.v))
	}
	*t = NewTierRates(vs...)
	return nil
}

// add returns t plus o/n tier by tier, for Mean.
func (t TierRates) add(o TierRates, n float64) TierRates {
	if o.n > t.n {
		t.n = o.n
	}
	for i := range o.n {
		t.v[i] += o.v[i] / n
	}
	return t
}

// SyncMinRetries is the fewest retries for which the table shows
// SyncShare: below it the share of a handful of retries is noise, and the
// cell reads "–".
const SyncMinRetries = 100

// Series is a run's load over time at ChartStep resolution.
type Series struct {
	// StepMS is the width of one step in milliseconds: ChartStep (100)
	// rounded down to a whole number of the run's buckets, at least one
	// bucket. Element i of each slice covers [i·StepMS, (i+1)·StepMS) ms
	// of the run.
	StepMS float64 `json:"step_ms"`
	// Load is attempts sent to the measured tier per second, and Retries
	// the part of them that were retries.
	Load    []float64 `json:"load_per_s"`
	Retries []float64 `json:"retries_per_s"`
	// Goodput is client calls ending in success per second; Failed those
	// ending in failure.
	Goodput []float64 `json:"goodput_per_s"`
	Failed  []float64 `json:"failed_per_s"`
	// Queue and InFlight are the highest values within each step.
	Queue    []float64 `json:"queue"`
	InFlight []float64 `json:"in_flight"`
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sum32(xs []int32) int64 {
	var s int64
	for _, x := range xs {
		s += int64(x)
	}
	return s
}

func max32(xs []int32) int32 {
	var m int32
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// Mean returns the mean of ms field by field. Recovered becomes the share
// of runs that recovered and RecoveryS the mean over those runs.
func Mean(ms []Metrics) Metrics {
	var out Metrics
	if len(ms) == 0 {
		return out
	}
	n := float64(len(ms))
	var recN float64
	for _, m := range ms {
		out.Trials += max(m.Trials, 1)
	}
	for _, m := range ms {
		out.Calls += m.Calls / n
		out.Succeeded += m.Succeeded / n
		out.SuccessRate += m.SuccessRate / n
		out.SuccessInRun += m.SuccessInRun / n
		out.Goodput += m.Goodput / n
		out.Attempts += m.Attempts / n
		out.Retries += m.Retries / n
		out.AttemptsPerCall += m.AttemptsPerCall / n
		out.FaultAttemptsPerCall += m.FaultAttemptsPerCall / n
		out.FaultTierAttemptsPerCall = out.FaultTierAttemptsPerCall.add(m.FaultTierAttemptsPerCall, n)
		out.LocalRejected += m.LocalRejected / n
		out.BaselineLoad += m.BaselineLoad / n
		out.PeakLoad += m.PeakLoad / n
		out.Amplification += m.Amplification / n
		out.ReferenceLoad += m.ReferenceLoad / n
		out.SteadyLoad += m.SteadyLoad / n
		out.PeakLoadAfter += m.PeakLoadAfter / n
		out.AmplificationAfter += m.AmplificationAfter / n
		out.PeakConcurrency += m.PeakConcurrency / n
		out.Reports += m.Reports / n
		out.ReportsDelivered += m.ReportsDelivered / n
		out.ReportsDelayed += m.ReportsDelayed / n
		out.ReportsDropped += m.ReportsDropped / n
		out.ReportsPending += m.ReportsPending / n
		out.PeakQueue += m.PeakQueue / n
		out.PeakInFlight += m.PeakInFlight / n
		out.Recovered += m.Recovered / n
		out.Unobserved += m.Unobserved / n
		if m.Recovered > 0 {
			out.RecoveryS += m.RecoveryS
			recN++
		}
		out.P50ms += m.P50ms / n
		out.P99ms += m.P99ms / n
		out.P999ms += m.P999ms / n
		out.OpenCalls += m.OpenCalls / n
		out.P50Open += m.P50Open / n
		out.P99Open += m.P99Open / n
		out.P999Open += m.P999Open / n
		out.SyncShare += m.SyncShare / n
		out.KurtosisPoisson += m.KurtosisPoisson / n
		out.Kurtosis += m.Kurtosis / n
	}
	if recN > 0 {
		out.RecoveryS /= recN
	}
	return out
}
