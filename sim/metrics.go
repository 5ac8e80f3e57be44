package sim

import (
	"math"
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
	// ChartStep is the resolution of Result.Series.
	ChartStep = 100 * time.Millisecond
)

// Metrics is what a run measured, or the mean over trials of several runs
// (see Mean). "The measured tier" is Model.Measure; "calls" are the
// clients' calls (end to end); attempts are attempts sent to the measured
// tier. All rates are per second of virtual time.
type Metrics struct {
	// Calls the clients started, and how many succeeded (calls still open
	// when the run ends count as failed).
	Calls     float64 `json:"calls"`
	Succeeded float64 `json:"succeeded"`
	// SuccessRate is Succeeded / Calls.
	SuccessRate float64 `json:"success_rate"`
	// Goodput is successful calls per second of the workload's Duration.
	Goodput float64 `json:"goodput_per_s"`
	// Attempts (the work) sent to the measured tier, first tries and
	// retries; Retries of them.
	Attempts float64 `json:"attempts"`
	Retries  float64 `json:"retries"`
	// AttemptsPerCall is Attempts / Calls: 1 without retries; in a chain
	// of tiers, the load multiplier on the measured tier.
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// BaselineLoad is attempts per second in the baseline window (after
	// Warmup, before the first fault).
	BaselineLoad float64 `json:"baseline_load_per_s"`
	// PeakLoad is the highest attempts-per-second rate over any PeakWindow
	// (1s) window of the run, sliding by one bucket (10ms).
	PeakLoad float64 `json:"peak_load_per_s"`
	// Amplification is PeakLoad / BaselineLoad.
	Amplification float64 `json:"amplification"`
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
	// RecoveryS is the time in seconds from the end of the last fault to
	// the first instant T such that, over [T, T+RecoveryHold) (1s), both
	// the share of client calls ending in success and the share of
	// attempts to the measured tier ending in success are at least
	// RecoveryRatio (99%) of their baseline values (a window in which no
	// call or no attempt ends does not qualify), and the measured tier's
	// queue stays no longer than the longest queue of the baseline window
	// (the backlog is drained). The judgement uses the model's buckets (10ms) and only
	// windows that end by Duration. A mean over trials averages the trials
	// that recovered.
	RecoveryS float64 `json:"recovery_s"`
	// Latency percentiles of client calls (successful or not), in
	// milliseconds, by nearest rank.
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	P999ms float64 `json:"p999_ms"`
	// SyncShare is the share of retries (to the measured tier, by the time
	// they are sent) that fall in synchronized spikes: buckets (10ms) that
	// hold at least SpikeMin (5) retries and at least SpikeFactor (4) times
	// the mean retries per bucket over the SpikeWindow (1s) centred on the
	// bucket. Retries spread by jitter score near 0; retries in lockstep
	// near 1. 0 without retries.
	SyncShare float64 `json:"sync_share"`
	// Kurtosis is the Pearson kurtosis m4/m2² of the offered-load series
	// (attempts per bucket, over Duration): 3 for Gaussian noise, about 3
	// or less for steady load, much higher for load concentrated in
	// spikes. 0 for a constant series.
	Kurtosis float64 `json:"kurtosis"`
}

// Series is a run's load over time at ChartStep resolution.
type Series struct {
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

func (r *recorder) metrics(m *Model) Metrics {
	var x Metrics
	x.Calls = float64(r.calls)
	x.Succeeded = float64(r.succeeded)
	x.SuccessRate = ratio(x.Succeeded, x.Calls)
	x.Goodput = x.Succeeded / m.Duration.Seconds()
	x.Attempts = float64(r.attempts)
	x.Retries = float64(r.retried)
	x.AttemptsPerCall = ratio(x.Attempts, x.Calls)

	from, to := m.baseline()
	bf, bt := r.idx(from), r.idx(to)
	x.BaselineLoad = ratio(float64(sum32(r.offered[bf:bt])), (time.Duration(bt-bf) * r.bucket).Seconds())
	x.PeakLoad = peakRate(r.offered, r.bucket, PeakWindow)
	x.Amplification = ratio(x.PeakLoad, x.BaselineLoad)
	x.PeakConcurrency = float64(max32(r.conc.peak))
	x.PeakQueue = float64(max32(r.queue.peak))
	x.PeakInFlight = float64(max32(r.inflight.peak))

	x.Recovered = 1
	if _, end, ok := m.faultWindow(); ok {
		rec, ok := recoveryTime([]outcomes{{r.okCalls, r.badCall}, {r.okAtts, r.badAtts}}, r.queue.peak, r.bucket, bf, bt, r.idx(end), r.idx(m.Duration))
		if ok {
			x.RecoveryS = rec.Seconds()
		} else {
			x.Recovered = 0
		}
	}
	x.P50ms = ms(percentile(r.latencies, 0.50))
	x.P99ms = ms(percentile(r.latencies, 0.99))
	x.P999ms = ms(percentile(r.latencies, 0.999))
	x.SyncShare = syncShare(r.retries, r.bucket)
	x.Kurtosis = kurtosis(r.offered[:r.idx(m.Duration)])
	return x
}

func (r *recorder) series(m *Model) Series {
	k := max(int(ChartStep/r.bucket), 1)
	step := time.Duration(k) * r.bucket
	n := (r.n + k - 1) / k
	perS := 1 / step.Seconds()
	s := Series{
		StepMS:   ms(step),
		Load:     make([]float64, n),
		Retries:  make([]float64, n),
		Goodput:  make([]float64, n),
		Failed:   make([]float64, n),
		Queue:    make([]float64, n),
		InFlight: make([]float64, n),
	}
	for i := 0; i < r.n; i++ {
		j := i / k
		s.Load[j] += float64(r.offered[i]) * perS
		s.Retries[j] += float64(r.retries[i]) * perS
		s.Goodput[j] += float64(r.okCalls[i]) * perS
		s.Failed[j] += float64(r.badCall[i]) * perS
		s.Queue[j] = max(s.Queue[j], float64(r.queue.peak[i]))
		s.InFlight[j] = max(s.InFlight[j], float64(r.inflight.peak[i]))
	}
	return s
}

// peakRate returns the highest count per second over any window of the
// given width sliding over the bucket series.
func peakRate(counts []int32, bucket, window time.Duration) float64 {
	w := max(int(window/bucket), 1)
	var run, best int64
	for i, c := range counts {
		run += int64(c)
		if i >= w {
			run -= int64(counts[i-w])
		}
		best = max(best, run)
	}
	return float64(best) / (time.Duration(w) * bucket).Seconds()
}

// outcomes are per-bucket counts of successes and failures.
type outcomes struct{ ok, bad []int32 }

// recoveryTime finds the first bucket T ≥ end such that for every series
// the outcomes in [T, T+RecoveryHold) succeed at a rate of at least
// RecoveryRatio times the baseline's (buckets [bf, bt)), with at least one
// outcome, and the queue stays within the baseline's longest queue
// throughout [T, T+RecoveryHold). The window must end by bucket limit. It
// returns T-end.
func recoveryTime(series []outcomes, queue []int32, bucket time.Duration, bf, bt, end, limit int) (time.Duration, bool) {
	hold := max(int(RecoveryHold/bucket), 1)
	limit = min(limit, len(queue))
	baseQueue := max32(queue[bf:bt])
	type track struct {
		o         outcomes
		need      float64
		okW, allW int64
	}
	tr := make([]track, len(series))
	for i, o := range series {
		ok, all := sum32(o.ok[bf:bt]), sum32(o.ok[bf:bt])+sum32(o.bad[bf:bt])
		rate := 1.0
		if all > 0 {
			rate = float64(ok) / float64(all)
		}
		tr[i] = track{o: o, need: RecoveryRatio * rate}
		for b := end; b < end+hold && b < limit; b++ {
			tr[i].okW += int64(o.ok[b])
			tr[i].allW += int64(o.ok[b] + o.bad[b])
		}
	}
	// nextLong[t] is the first bucket at or after t whose queue peak is
	// above the baseline's.
	nextLong := make([]int, limit+1)
	nextLong[limit] = limit
	for t := limit - 1; t >= 0; t-- {
		nextLong[t] = nextLong[t+1]
		if queue[t] > baseQueue {
			nextLong[t] = t
		}
	}
	for t := end; t+hold <= limit; t++ {
		healthy := nextLong[t] >= t+hold
		for i := range tr {
			x := &tr[i]
			if x.allW == 0 || float64(x.okW) < x.need*float64(x.allW) {
				healthy = false
			}
		}
		if healthy {
			return time.Duration(t-end) * bucket, true
		}
		for i := range tr {
			x := &tr[i]
			x.okW -= int64(x.o.ok[t])
			x.allW -= int64(x.o.ok[t] + x.o.bad[t])
			if n := t + hold; n < limit {
				x.okW += int64(x.o.ok[n])
				x.allW += int64(x.o.ok[n] + x.o.bad[n])
			}
		}
	}
	return 0, false
}

// syncShare implements Metrics.SyncShare.
func syncShare(retries []int32, bucket time.Duration) float64 {
	w := max(int(SpikeWindow/bucket), 1)
	prefix := make([]int64, len(retries)+1)
	for i, r := range retries {
		prefix[i+1] = prefix[i] + int64(r)
	}
	total := prefix[len(retries)]
	if total == 0 {
		return 0
	}
	var inSpikes int64
	for i, r := range retries {
		if r < SpikeMin {
			continue
		}
		lo, hi := max(i-w/2, 0), min(i+w-w/2, len(retries))
		mean := float64(prefix[hi]-prefix[lo]) / float64(hi-lo)
		if float64(r) >= SpikeFactor*mean {
			inSpikes += int64(r)
		}
	}
	return float64(inSpikes) / float64(total)
}

// kurtosis returns m4/m2² of xs, 0 when the variance is 0.
func kurtosis(xs []int32) float64 {
	if len(xs) == 0 {
		return 0
	}
	var mean float64
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	var m2, m4 float64
	for _, x := range xs {
		d := float64(x) - mean
		d2 := d * d
		m2 += d2
		m4 += d2 * d2
	}
	m2 /= float64(len(xs))
	m4 /= float64(len(xs))
	if m2 == 0 {
		return 0
	}
	return m4 / (m2 * m2)
}

// percentile returns the nearest-rank p-quantile of sorted: the smallest
// value with at least a share p of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[nearestRank(len(sorted), p)]
}

// nearestRank returns the index of the nearest-rank p-quantile among n
// sorted values (n > 0).
func nearestRank(n int, p float64) int {
	i := int(math.Ceil(p*float64(n))) - 1
	return min(max(i, 0), n-1)
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
		out.Calls += m.Calls / n
		out.Succeeded += m.Succeeded / n
		out.SuccessRate += m.SuccessRate / n
		out.Goodput += m.Goodput / n
		out.Attempts += m.Attempts / n
		out.Retries += m.Retries / n
		out.AttemptsPerCall += m.AttemptsPerCall / n
		out.BaselineLoad += m.BaselineLoad / n
		out.PeakLoad += m.PeakLoad / n
		out.Amplification += m.Amplification / n
		out.PeakConcurrency += m.PeakConcurrency / n
		out.PeakQueue += m.PeakQueue / n
		out.PeakInFlight += m.PeakInFlight / n
		out.Recovered += m.Recovered / n
		if m.Recovered > 0 {
			out.RecoveryS += m.RecoveryS
			recN++
		}
		out.P50ms += m.P50ms / n
		out.P99ms += m.P99ms / n
		out.P999ms += m.P999ms / n
		out.SyncShare += m.SyncShare / n
		out.Kurtosis += m.Kurtosis / n
	}
	if recN > 0 {
		out.RecoveryS /= recN
	}
	return out
}
