package promretry

import (
	"math"
	"sync/atomic"
	"time"
)

// durationHistogram counts call durations into fixed buckets, comparing
// integer durations, with one atomic addition and one compare-and-swap of
// the float64 sum: about half of a client_golang Histogram on the request
// path. The count is the sum of the buckets, so buckets and count always
// agree; the sum may miss observations in flight during a scrape.
type durationHistogram struct {
	bounds []time.Duration // upper bounds, ascending; shared by every operation
	counts []atomic.Uint64 // len(bounds)+1: the last is +Inf
	sum    atomic.Uint64   // float64 bits of the sum of durations, in seconds
	upper  []float64       // bounds in seconds, for exposition; shared
}

func newDurationHistogram(bounds []time.Duration, upper []float64) *durationHistogram {
	return &durationHistogram{bounds: bounds, upper: upper, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// observe records one duration: it lands in the first bucket whose upper
// bound it does not exceed (Prometheus's "le").
func (h *durationHistogram) observe(d time.Duration) {
	i := 0
	if n := len(h.bounds); n > 16 {
		lo, hi := 0, n // binary search for long bucket lists
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if d > h.bounds[m] {
				lo = m + 1
			} else {
				hi = m
			}
		}
		i = lo
	} else {
		for i < n && d > h.bounds[i] {
			i++
		}
	}
	h.counts[i].Add(1)
	v := d.Seconds()
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// snapshot returns the sample count, the sum in seconds and the cumulative
// bucket counts keyed by upper bound (without +Inf), as
// prometheus.NewConstHistogram takes them.
func (h *durationHistogram) snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.upper))
	for i, ub := range h.upper {
		count += h.counts[i].Load()
		buckets[ub] = count
	}
	count += h.counts[len(h.upper)].Load()
	sum = math.Float64frombits(h.sum.Load())
	return count, sum, buckets
}

// bucketBounds validates and converts upper bounds in seconds to durations:
// they must be finite and strictly increasing; +Inf at the end is dropped
// (it is implicit).
func bucketBounds(upper []float64) ([]time.Duration, []float64) {
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	bounds := make([]time.Duration, len(upper))
	for i, ub := range upper {
		if math.IsNaN(ub) || math.IsInf(ub, 0) {
			panic("prometheus: histogram bucket bounds must be finite")
		}
		if i > 0 && ub <= upper[i-1] {
			panic("prometheus: histogram bucket bounds must be in increasing order")
		}
		bounds[i] = time.Duration(math.Round(ub * 1e9))
	}
	return bounds, append([]float64(nil), upper...)
}
