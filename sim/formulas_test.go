package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const b10 = 10 * time.Millisecond

func TestPeakRateSlidesOverBuckets(t *testing.T) {
	counts := make([]int32, 300)
	for i := range counts {
		counts[i] = 1 // 100 per second
	}
	if got := PeakRate(counts, b10, time.Second); got != 100 {
		t.Fatalf("steady peak %v, want 100/s", got)
	}
	// 50 extra attempts in one bucket: the best 1s window holds 150.
	counts[150] += 50
	if got := PeakRate(counts, b10, time.Second); got != 150 {
		t.Fatalf("peak %v, want 150/s", got)
	}
	// A burst split across a window boundary is still found whole.
	counts[150] -= 50
	counts[95] += 25
	counts[105] += 25
	if got := PeakRate(counts, b10, time.Second); got != 150 {
		t.Fatalf("peak across buckets %v, want 150/s", got)
	}
}

func TestRecoveryTime(t *testing.T) {
	n := 1000 // 10s
	ok := make([]int32, n)
	bad := make([]int32, n)
	queue := make([]int32, n)
	for i := range ok {
		ok[i] = 10
	}
	// Baseline [0, 2s): all succeed, the queue peaks at 3.
	queue[50] = 3
	// Fault [2s, 4s): everything fails; after it, failures go on until 5s
	// and the queue stays long until 5.5s.
	for i := 200; i < 500; i++ {
		ok[i], bad[i] = 0, 10
	}
	for i := 200; i < 550; i++ {
		queue[i] = 100
	}
	calls := Outcomes{ok, bad}
	got, recovered := RecoveryTime([]Outcomes{calls}, queue, b10, 0, 200, 400, n)
	if !recovered || got != 1500*time.Millisecond {
		t.Fatalf("recovery %v %v, want 1.5s (queue drained at 5.5s)", got, recovered)
	}
	// Without the queue condition it is 1s (failures end at 5s).
	for i := 500; i < 550; i++ {
		queue[i] = 0
	}
	if got, _ := RecoveryTime([]Outcomes{calls}, queue, b10, 0, 200, 400, n); got != time.Second {
		t.Fatalf("recovery %v, want 1s", got)
	}
	// 2% failures after 5s: below 99% of a 100% baseline, never recovered.
	for i := 500; i < n; i++ {
		ok[i], bad[i] = 49, 1
	}
	if _, recovered := RecoveryTime([]Outcomes{calls}, queue, b10, 0, 200, 400, n); recovered {
		t.Fatal("recovered at 98% success against a 100% baseline")
	}
	// The same 2% against a baseline that itself had 2% failures is fine.
	for i := 0; i < 200; i++ {
		ok[i], bad[i] = 49, 1
	}
	if got, recovered := RecoveryTime([]Outcomes{calls}, queue, b10, 0, 200, 400, n); !recovered || got != time.Second {
		t.Fatalf("recovery %v %v, want 1s", got, recovered)
	}
	// Every series must be healthy: attempts failing until 7s delay it.
	atts := Outcomes{make([]int32, n), make([]int32, n)}
	for i := range atts.OK {
		atts.OK[i] = 5
		if i >= 200 && i < 700 {
			atts.OK[i], atts.Failed[i] = 0, 5
		}
	}
	// (The window starting at 6.99s holds one failing bucket of 100: 99%.)
	if got, _ := RecoveryTime([]Outcomes{calls, atts}, queue, b10, 0, 200, 400, n); got != 2990*time.Millisecond {
		t.Fatalf("recovery with attempts %v, want 2.99s", got)
	}
	// A window must end by the limit, and an empty window does not count.
	if _, recovered := RecoveryTime([]Outcomes{calls, atts}, queue, b10, 0, 200, 400, 750); recovered {
		t.Fatal("recovered in a window that ends after the limit")
	}
	empty := Outcomes{make([]int32, n), make([]int32, n)}
	if _, recovered := RecoveryTime([]Outcomes{empty}, queue, b10, 0, 200, 400, n); recovered {
		t.Fatal("recovered with no outcomes at all")
	}
}

func TestSyncShare(t *testing.T) {
	n := 1000
	spread := make([]int32, n)
	for i := range spread {
		spread[i] = 2
	}
	if got := SyncShare(spread, b10); got != 0 {
		t.Fatalf("evenly spread retries: share %v, want 0", got)
	}
	// Lockstep: 100 retries every second in a single bucket, nothing else.
	lock := make([]int32, n)
	for i := 50; i < n; i += 100 {
		lock[i] = 100
	}
	if got := SyncShare(lock, b10); got != 1 {
		t.Fatalf("lockstep retries: share %v, want 1", got)
	}
	// Spikes over a background: the spike buckets (background included)
	// hold 10·102 of the 3,000 retries.
	mixed := make([]int32, n)
	copy(mixed, spread)
	for i := 50; i < n; i += 100 {
		mixed[i] += 100
	}
	want := float64(10*102) / float64(2*n+1000)
	if got := SyncShare(mixed, b10); math.Abs(got-want) > 1e-12 {
		t.Fatalf("mixed: share %v, want %v", got, want)
	}
	// Small counts are never spikes, however uneven.
	sparse := make([]int32, n)
	sparse[10], sparse[500] = 4, 4
	if got := SyncShare(sparse, b10); got != 0 {
		t.Fatalf("sparse retries: share %v, want 0", got)
	}
	if got := SyncShare(make([]int32, n), b10); got != 0 {
		t.Fatalf("no retries: share %v", got)
	}
}

func TestKurtosis(t *testing.T) {
	if got := Kurtosis([]int32{5, 5, 5}); got != 0 {
		t.Fatalf("constant series: %v, want 0", got)
	}
	// Two values equally often: m4/m2² = 1.
	if got := Kurtosis([]int32{0, 2, 0, 2}); math.Abs(got-1) > 1e-12 {
		t.Fatalf("two-point series: %v, want 1", got)
	}
	// One spike among zeros: heavy-tailed, about n-2 for n values.
	spike := make([]int32, 100)
	spike[3] = 50
	n := 100.0
	mean := 50 / n
	m2 := ((n-1)*mean*mean + (50-mean)*(50-mean)) / n
	m4 := ((n-1)*math.Pow(mean, 4) + math.Pow(50-mean, 4)) / n
	if got := Kurtosis(spike); math.Abs(got-m4/(m2*m2)) > 1e-9 || got < 90 {
		t.Fatalf("spike series: %v, want %v", got, m4/(m2*m2))
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 1000; i++ {
		xs = append(xs, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestPeakRateShortSeriesAndBadBucket(t *testing.T) {
	short := []int32{2, 2, 2, 2, 2, 2, 2, 2, 2, 2} // 100ms of a 1s window
	if got := PeakRate(short, b10, time.Second); got != 20 {
		t.Errorf("a series shorter than the window: %v, want 20 (20 in the 1s window)", got)
	}
	if got := PeakRate(short, 0, time.Second); got != 0 {
		t.Errorf("zero bucket: %v, want 0", got)
	}
	if got := PeakRate(short, b10, 0); got != 200 {
		t.Errorf("window below a bucket: %v, want one bucket's rate, 200/s", got)
	}
}

func TestKurtosisSmallSeries(t *testing.T) {
	// mean 1, deviations -1 -1 -1 3: m2 = 3, m4 = 21, m4/m2² = 7/3.
	if got := Kurtosis([]int32{0, 0, 0, 4}); math.Abs(got-7.0/3) > 1e-12 {
		t.Errorf("Kurtosis = %v, want 7/3", got)
	}
	if got := Kurtosis(nil); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestPercentileOutOfRange(t *testing.T) {
	xs := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.1, 1}, {0.11, 2}, {-1, 1}, {math.NaN(), 1}, {2, 10}, {math.Inf(1), 10}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestRecoveryTimeCutsIndexesToTheSeries(t *testing.T) {
	ok := make([]int32, 300)
	for i := range ok {
		ok[i] = 1
	}
	calls := Outcomes{ok, make([]int32, 300)}
	// Indexes beyond the series are cut to it: a healthy run recovers at once.
	if got, recovered := RecoveryTime([]Outcomes{calls}, make([]int32, 300), b10, -5, 10_000, 100, 10_000); !recovered || got != 0 {
		t.Errorf("recovery %v %v, want 0 true", got, recovered)
	}
	// A queue shorter than the outcomes cuts the window: no hold fits.
	if _, recovered := RecoveryTime([]Outcomes{calls}, make([]int32, 150), b10, 0, 100, 100, 300); recovered {
		t.Error("recovered in a window beyond the queue")
	}
	if _, recovered := RecoveryTime([]Outcomes{calls}, make([]int32, 300), 0, 0, 100, 100, 300); recovered {
		t.Error("recovered with a zero bucket")
	}
}

// Properties of the formulas on any input: they never panic, and their
// results stay within what the input allows.
func TestFormulasProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		counts := rapid.SliceOfN(rapid.Int32Range(0, 1000), 0, 400).Draw(rt, "counts")
		bucket := time.Duration(rapid.IntRange(1, 100).Draw(rt, "bucket ms")) * time.Millisecond
		window := time.Duration(rapid.IntRange(0, 3000).Draw(rt, "window ms")) * time.Millisecond

		// The peak rate is at least the rate of the busiest bucket spread
		// over the window, and at most the whole series in one window.
		peak := PeakRate(counts, bucket, window)
		w := time.Duration(max(int(window/bucket), 1)) * bucket
		if lo, hi := float64(max32(counts))/w.Seconds(), float64(sum32(counts))/w.Seconds(); peak < lo-1e-9 || peak > hi+1e-9 {
			rt.Fatalf("PeakRate %v outside [%v, %v]", peak, lo, hi)
		}
		if s := SyncShare(counts, bucket); s < 0 || s > 1 {
			rt.Fatalf("SyncShare %v outside [0, 1]", s)
		}
		if k := Kurtosis(counts); k < 0 || math.IsNaN(k) {
			rt.Fatalf("Kurtosis %v", k)
		} else if k != 0 && k < 1-1e-9 {
			rt.Fatalf("Kurtosis %v below 1, the least any distribution has", k)
		}

		// A percentile is an element, and grows with p.
		lat := make([]time.Duration, len(counts))
		for i, c := range counts {
			lat[i] = time.Duration(c)
		}
		slices.Sort(lat)
		p1 := rapid.Float64Range(0, 1).Draw(rt, "p1")
		p2 := rapid.Float64Range(p1, 1).Draw(rt, "p2")
		a, b := Percentile(lat, p1), Percentile(lat, p2)
		if len(lat) > 0 && (!slices.Contains(lat, a) || b < a) {
			rt.Fatalf("Percentile(%v)=%v, Percentile(%v)=%v", p1, a, p2, b)
		}

		// Recovery, when found, lies between the fault's end and the limit.
		bad := rapid.SliceOfN(rapid.Int32Range(0, 1000), len(counts), len(counts)).Draw(rt, "bad")
		queue := rapid.SliceOfN(rapid.Int32Range(0, 5), len(counts), len(counts)).Draw(rt, "queue")
		bf, bt := rapid.IntRange(-10, 500).Draw(rt, "bf"), rapid.IntRange(-10, 500).Draw(rt, "bt")
		end, limit := rapid.IntRange(-10, 500).Draw(rt, "end"), rapid.IntRange(-10, 500).Draw(rt, "limit")
		rec, ok := RecoveryTime([]Outcomes{{counts, bad}}, queue, bucket, bf, bt, end, limit)
		if ok && (rec < 0 || rec > time.Duration(max(limit-end, 0))*bucket) {
			rt.Fatalf("recovery %v beyond the limit", rec)
		}
		if !ok && rec != 0 {
			rt.Fatalf("no recovery but %v", rec)
		}
	})
}
