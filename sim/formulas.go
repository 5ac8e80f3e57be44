package sim

import (
	"math"
	"time"
)

// The functions below are the definitions documented on the fields of
// Metrics, on per-bucket data: counts of events in consecutive time
// buckets of one width (the simulator's are 10ms). Recording.Metrics
// applies them to a run; they are exported for harnesses that record
// their own runs (the live package measures real traffic with them) and
// want the same numbers. Each returns 0 (or false) for a bucket width that
// is not positive.

// PeakRate returns the highest count per second over any window of the
// given width sliding one bucket at a time over counts, buckets of width
// bucket: Metrics.PeakLoad is PeakRate(attempts, bucket, PeakWindow). A
// window spans at least one bucket; a series shorter than the window
// counts as zeros after its end.
func PeakRate(counts []int32, bucket, window time.Duration) float64 {
	if bucket <= 0 {
		return 0
	}
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

// Outcomes are the per-bucket counts of successes and failures of one kind
// of operation (client calls, or attempts to a tier), by the bucket in
// which each ended: what RecoveryTime judges.
type Outcomes struct {
	// OK and Failed hold, for each bucket i (the bucket width is the
	// caller's), how many operations ended in it with success and with
	// failure; RecoveryTime reads both only as far as the shorter goes.
	OK, Failed []int32
}

// RecoveryTime implements Metrics.RecoveryS. It returns the time from
// bucket end (where the last fault ended) to the first bucket T ≥ end such
// that, over the buckets [T, T+RecoveryHold):
//
//   - every series of outcomes has at least one outcome and succeeds at a
//     rate of at least RecoveryRatio times its rate in the baseline
//     buckets [baseFrom, baseTo) (a baseline without outcomes counts as a
//     rate of 1), and
//   - queue, the measured tier's longest queue per bucket, stays no longer
//     than its longest in the baseline;
//
// and whether there is such a T whose window ends by bucket limit. The
// simulator judges client calls and attempts to the measured tier, up to
// the bucket of the workload's Duration. Indexes beyond the shortest
// series are cut to it.
func RecoveryTime(series []Outcomes, queue []int32, bucket time.Duration, baseFrom, baseTo, end, limit int) (time.Duration, bool) {
	return RecoveryTimeSlack(series, queue, 0, bucket, baseFrom, baseTo, end, limit)
}

// RecoveryTimeSlack is RecoveryTime with a tolerance on the queue: the
// backlog counts as drained while the queue is at most slack longer than
// the baseline window's longest. Recording.Metrics passes
// Recording.QueueSlack, a share of the measured tier's workers, so that
// one short peak of a few requests in front of many workers does not
// move the recovery.
func RecoveryTimeSlack(series []Outcomes, queue []int32, slack int32, bucket time.Duration, baseFrom, baseTo, end, limit int) (time.Duration, bool) {
	if bucket <= 0 {
		return 0, false
	}
	n := len(queue)
	for _, o := range series {
		n = min(n, len(o.OK), len(o.Failed))
	}
	limit = min(max(limit, 0), n)
	baseTo = min(max(baseTo, 0), n)
	baseFrom = min(max(baseFrom, 0), baseTo)
	end = max(end, 0)

	hold := max(int(RecoveryHold/bucket), 1)
	baseQueue := max32(queue[baseFrom:baseTo]) + max(slack, 0)
	type track struct {
		o         Outcomes
		need      float64
		okW, allW int64
	}
	tr := make([]track, len(series))
	for i, o := range series {
		ok, all := sum32(o.OK[baseFrom:baseTo]), sum32(o.OK[baseFrom:baseTo])+sum32(o.Failed[baseFrom:baseTo])
		rate := 1.0
		if all > 0 {
			rate = float64(ok) / float64(all)
		}
		tr[i] = track{o: o, need: RecoveryRatio * rate}
		for b := end; b < end+hold && b < limit; b++ {
			tr[i].okW += int64(o.OK[b])
			tr[i].allW += int64(o.OK[b] + o.Failed[b])
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
			x.okW -= int64(x.o.OK[t])
			x.allW -= int64(x.o.OK[t] + x.o.Failed[t])
			if n := t + hold; n < limit {
				x.okW += int64(x.o.OK[n])
				x.allW += int64(x.o.OK[n] + x.o.Failed[n])
			}
		}
	}
	return 0, false
}

// SyncShare implements Metrics.SyncShare on retries per bucket: the share
// of the retries that fall in buckets holding at least SpikeMin retries
// and at least SpikeFactor times the mean per bucket of the SpikeWindow
// centred on them. 0 without retries.
func SyncShare(retries []int32, bucket time.Duration) float64 {
	if bucket <= 0 {
		return 0
	}
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

// Kurtosis returns the Pearson kurtosis m4/m2² of xs (Metrics.Kurtosis
// applies it to the attempts per bucket), or 0 when xs is empty or
// constant.
func Kurtosis(xs []int32) float64 {
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

// Percentile returns the nearest-rank p-quantile of sorted (ascending): the
// smallest value with at least a share p of the values at or below it, the
// smallest for p ≤ 0 and the largest for p ≥ 1; 0 when sorted is empty.
// Metrics' latency percentiles are Percentile(latencies, 0.5), 0.99 and
// 0.999.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[nearestRank(len(sorted), p)]
}

// nearestRank returns the index of the nearest-rank p-quantile among n
// sorted values (n > 0).
func nearestRank(n int, p float64) int {
	switch {
	case !(p > 0): // NaN too
		p = 0
	case p > 1:
		p = 1
	}
	i := int(math.Ceil(p*float64(n))) - 1
	return min(max(i, 0), n-1)
}

// StdErr returns the standard error of the mean of xs: the sample
// standard deviation (n−1 in the denominator) over √n. 0 for fewer than
// two values.
func StdErr(xs []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var mean float64
	for _, x := range xs {
		mean += x / n
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss/(n-1)) / math.Sqrt(n)
}

// tTable holds the 0.975 quantiles of Student's t distribution for 1 to
// 30 degrees of freedom (to three decimals, as statistics tables print
// them): the factor of a two-sided 95% confidence interval of a mean of
// df+1 values.
var tTable = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// TQuantile95 returns the number of standard errors of a two-sided 95%
// confidence interval of the mean of df+1 values: the 0.975 quantile of
// Student's t distribution with df degrees of freedom (4.303 for the
// mean of 3 trials, where the normal approximation's 1.96 would give an
// 81% interval). For df from 1 to 30 it is the tabulated value; beyond,
// the normal quantile 1.95996 with the Cornish-Fisher correction
// z + (z³+z)/(4·df) + (5z⁵+16z³+3z)/(96·df²), within 0.001 of the exact
// quantile there and tending to the normal one. 0 for df < 1 (one value
// has no interval).
func TQuantile95(df int) float64 {
	switch {
	case df < 1:
		return 0
	case df <= len(tTable):
		return tTable[df-1]
	}
	const z = 1.959963984540054
	n := float64(df)
	z3, z5 := z*z*z, z*z*z*z*z
	return z + (z3+z)/(4*n) + (5*z5+16*z3+3*z)/(96*n*n)
}

// CIHalfWidth returns the half-width of the two-sided 95% confidence
// interval of the mean of xs: TQuantile95(len(xs)−1) × StdErr(xs). 0 for
// fewer than two values.
func CIHalfWidth(xs []float64) float64 {
	return TQuantile95(len(xs)-1) * StdErr(xs)
}
