package sim

import (
	"math"
	"testing"
	"time"
)

const b10 = 10 * time.Millisecond

func TestPeakRateSlidesOverBuckets(t *testing.T) {
	counts := make([]int32, 300)
	for i := range counts {
		counts[i] = 1 // 100 per second
	}
	if got := peakRate(counts, b10, time.Second); got != 100 {
		t.Fatalf("steady peak %v, want 100/s", got)
	}
	// 50 extra attempts in one bucket: the best 1s window holds 150.
	counts[150] += 50
	if got := peakRate(counts, b10, time.Second); got != 150 {
		t.Fatalf("peak %v, want 150/s", got)
	}
	// A burst split across a window boundary is still found whole.
	counts[150] -= 50
	counts[95] += 25
	counts[105] += 25
	if got := peakRate(counts, b10, time.Second); got != 150 {
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
	calls := outcomes{ok, bad}
	got, recovered := recoveryTime([]outcomes{calls}, queue, b10, 0, 200, 400, n)
	if !recovered || got != 1500*time.Millisecond {
		t.Fatalf("recovery %v %v, want 1.5s (queue drained at 5.5s)", got, recovered)
	}
	// Without the queue condition it is 1s (failures end at 5s).
	for i := 500; i < 550; i++ {
		queue[i] = 0
	}
	if got, _ := recoveryTime([]outcomes{calls}, queue, b10, 0, 200, 400, n); got != time.Second {
		t.Fatalf("recovery %v, want 1s", got)
	}
	// 2% failures after 5s: below 99% of a 100% baseline, never recovered.
	for i := 500; i < n; i++ {
		ok[i], bad[i] = 49, 1
	}
	if _, recovered := recoveryTime([]outcomes{calls}, queue, b10, 0, 200, 400, n); recovered {
		t.Fatal("recovered at 98% success against a 100% baseline")
	}
	// The same 2% against a baseline that itself had 2% failures is fine.
	for i := 0; i < 200; i++ {
		ok[i], bad[i] = 49, 1
	}
	if got, recovered := recoveryTime([]outcomes{calls}, queue, b10, 0, 200, 400, n); !recovered || got != time.Second {
		t.Fatalf("recovery %v %v, want 1s", got, recovered)
	}
	// Every series must be healthy: attempts failing until 7s delay it.
	atts := outcomes{make([]int32, n), make([]int32, n)}
	for i := range atts.ok {
		atts.ok[i] = 5
		if i >= 200 && i < 700 {
			atts.ok[i], atts.bad[i] = 0, 5
		}
	}
	// (The window starting at 6.99s holds one failing bucket of 100: 99%.)
	if got, _ := recoveryTime([]outcomes{calls, atts}, queue, b10, 0, 200, 400, n); got != 2990*time.Millisecond {
		t.Fatalf("recovery with attempts %v, want 2.99s", got)
	}
	// A window must end by the limit, and an empty window does not count.
	if _, recovered := recoveryTime([]outcomes{calls, atts}, queue, b10, 0, 200, 400, 750); recovered {
		t.Fatal("recovered in a window that ends after the limit")
	}
	empty := outcomes{make([]int32, n), make([]int32, n)}
	if _, recovered := recoveryTime([]outcomes{empty}, queue, b10, 0, 200, 400, n); recovered {
		t.Fatal("recovered with no outcomes at all")
	}
}

func TestSyncShare(t *testing.T) {
	n := 1000
	spread := make([]int32, n)
	for i := range spread {
		spread[i] = 2
	}
	if got := syncShare(spread, b10); got != 0 {
		t.Fatalf("evenly spread retries: share %v, want 0", got)
	}
	// Lockstep: 100 retries every second in a single bucket, nothing else.
	lock := make([]int32, n)
	for i := 50; i < n; i += 100 {
		lock[i] = 100
	}
	if got := syncShare(lock, b10); got != 1 {
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
	if got := syncShare(mixed, b10); math.Abs(got-want) > 1e-12 {
		t.Fatalf("mixed: share %v, want %v", got, want)
	}
	// Small counts are never spikes, however uneven.
	sparse := make([]int32, n)
	sparse[10], sparse[500] = 4, 4
	if got := syncShare(sparse, b10); got != 0 {
		t.Fatalf("sparse retries: share %v, want 0", got)
	}
	if got := syncShare(make([]int32, n), b10); got != 0 {
		t.Fatalf("no retries: share %v", got)
	}
}

func TestKurtosis(t *testing.T) {
	if got := kurtosis([]int32{5, 5, 5}); got != 0 {
		t.Fatalf("constant series: %v, want 0", got)
	}
	// Two values equally often: m4/m2² = 1.
	if got := kurtosis([]int32{0, 2, 0, 2}); math.Abs(got-1) > 1e-12 {
		t.Fatalf("two-point series: %v, want 1", got)
	}
	// One spike among zeros: heavy-tailed, about n-2 for n values.
	spike := make([]int32, 100)
	spike[3] = 50
	n := 100.0
	mean := 50 / n
	m2 := ((n-1)*mean*mean + (50-mean)*(50-mean)) / n
	m4 := ((n-1)*math.Pow(mean, 4) + math.Pow(50-mean, 4)) / n
	if got := kurtosis(spike); math.Abs(got-m4/(m2*m2)) > 1e-9 || got < 90 {
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
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestGaugeCarriesValuesForward(t *testing.T) {
	var g gauge
	g.init(6)
	g.set(0, 2)
	g.set(0, 1)
	g.set(3, 5)
	g.set(3, 0)
	g.finish()
	want := []int32{2, 1, 1, 5, 0, 0}
	for i, w := range want {
		if g.peak[i] != w {
			t.Fatalf("peaks %v, want %v", g.peak, want)
		}
	}
}

func TestMeanAveragesRecoveryOverRecoveredRuns(t *testing.T) {
	m := Mean([]Metrics{
		{Calls: 10, Recovered: 1, RecoveryS: 2},
		{Calls: 20, Recovered: 0},
		{Calls: 30, Recovered: 1, RecoveryS: 4},
	})
	if m.Calls != 20 || math.Abs(m.Recovered-2.0/3) > 1e-12 || m.RecoveryS != 3 {
		t.Fatalf("mean %+v", m)
	}
	if (Mean(nil) != Metrics{}) {
		t.Fatal("mean of nothing is not zero")
	}
}
