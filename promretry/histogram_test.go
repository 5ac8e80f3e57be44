package promretry

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestDurationHistogramMatchesNaive: for any increasing bounds (short
// lists take the linear search, long ones the binary search) and any
// durations, the cumulative buckets, count and sum are those of a naive
// count with Prometheus's "le" rule.
func TestDurationHistogramMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.SliceOfNDistinct(rapid.IntRange(1, 100000), 1, 40, rapid.ID[int]).Draw(t, "boundsMS")
		slices.Sort(ms)
		upper := make([]float64, len(ms))
		for i, m := range ms {
			upper[i] = float64(m) / 1000
		}
		bounds, up := bucketBounds(upper)
		h := newDurationHistogram(bounds, up)
		obs := rapid.SliceOf(rapid.Int64Range(-1000, 120_000_000)).Draw(t, "durationsUS")
		sum := 0.0
		for _, us := range obs {
			d := time.Duration(us) * time.Microsecond
			h.observe(d)
			sum += d.Seconds()
		}
		count, gotSum, buckets := h.snapshot()
		if count != uint64(len(obs)) {
			t.Fatalf("count %d, want %d", count, len(obs))
		}
		if math.Abs(gotSum-sum) > 1e-6*math.Max(1, math.Abs(sum)) {
			t.Fatalf("sum %v, want %v", gotSum, sum)
		}
		for i, ub := range upper {
			var want uint64
			for _, us := range obs {
				if time.Duration(us)*time.Microsecond <= bounds[i] {
					want++
				}
			}
			if buckets[ub] != want {
				t.Fatalf("bucket le=%v: %d, want %d", ub, buckets[ub], want)
			}
		}
	})
}

func TestDurationHistogramBoundary(t *testing.T) {
	bounds, upper := bucketBounds([]float64{0.005, 0.01, math.Inf(1)})
	if len(bounds) != 2 || bounds[0] != 5*time.Millisecond || bounds[1] != 10*time.Millisecond {
		t.Fatalf("bounds %v", bounds)
	}
	h := newDurationHistogram(bounds, upper)
	h.observe(5 * time.Millisecond)   // le=0.005
	h.observe(5*time.Millisecond + 1) // le=0.01
	h.observe(time.Hour)              // +Inf
	count, _, buckets := h.snapshot()
	if count != 3 || buckets[0.005] != 1 || buckets[0.01] != 2 {
		t.Errorf("count %d buckets %v", count, buckets)
	}
}

func TestBucketBoundsRejectsBadBounds(t *testing.T) {
	for _, b := range [][]float64{{1, 1}, {2, 1}, {math.NaN()}, {math.Inf(-1), 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("bucketBounds(%v) did not panic", b)
				}
			}()
			bucketBounds(b)
		}()
	}
}
