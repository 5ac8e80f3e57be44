package live

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// The measures below implement the definitions documented on sim.Metrics,
// with sim's constants (PeakWindow, RecoveryHold, RecoveryRatio,
// SpikeWindow, SpikeFactor, SpikeMin), on counts per bucket. The sim
// package keeps its own implementations unexported; when it exports them,
// these should go.

// peakRate returns the highest count per second over any window of the
// given width sliding over the bucket series (sim.Metrics.PeakLoad).
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

// recoveryTime implements sim.Metrics.RecoveryS: the first bucket T ≥ end
// such that for every series the outcomes in [T, T+RecoveryHold) succeed
// at a rate of at least RecoveryRatio times the baseline's (buckets
// [bf, bt)), with at least one outcome, and the queue in bucket T is no
// longer than the baseline's longest. The window must end by bucket
// limit. It returns T-end.
func recoveryTime(series []outcomes, queue []int32, bucket time.Duration, bf, bt, end, limit int) (time.Duration, bool) {
	hold := max(int(sim.RecoveryHold/bucket), 1)
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
		tr[i] = track{o: o, need: sim.RecoveryRatio * rate}
		for b := end; b < end+hold && b < limit; b++ {
			tr[i].okW += int64(o.ok[b])
			tr[i].allW += int64(o.ok[b] + o.bad[b])
		}
	}
	for t := end; t+hold <= limit; t++ {
		healthy := queue[t] <= baseQueue
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

// syncShare implements sim.Metrics.SyncShare.
func syncShare(retries []int32, bucket time.Duration) float64 {
	w := max(int(sim.SpikeWindow/bucket), 1)
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
		if r < sim.SpikeMin {
			continue
		}
		lo, hi := max(i-w/2, 0), min(i+w-w/2, len(retries))
		mean := float64(prefix[hi]-prefix[lo]) / float64(hi-lo)
		if float64(r) >= sim.SpikeFactor*mean {
			inSpikes += int64(r)
		}
	}
	return float64(inSpikes) / float64(total)
}

// kurtosis returns m4/m2² of xs (sim.Metrics.Kurtosis), 0 when the
// variance is 0.
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

// percentile returns the nearest-rank p-quantile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
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
