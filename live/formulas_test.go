package live

import (
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

const b10 = 10 * time.Millisecond

func fill(n int, v int32) []int32 {
	xs := make([]int32, n)
	for i := range xs {
		xs[i] = v
	}
	return xs
}

func TestPeakRate(t *testing.T) {
	xs := fill(300, 1) // 100 per second
	if got := peakRate(xs, b10, time.Second); got != 100 {
		t.Errorf("steady: %v, want 100", got)
	}
	xs[150] = 51 // one bucket of 51: the 1s windows holding it count 150
	if got := peakRate(xs, b10, time.Second); got != 150 {
		t.Errorf("burst: %v, want 150", got)
	}
	if got := peakRate(fill(10, 2), b10, time.Second); got != 20 {
		t.Errorf("a series shorter than the window: %v, want 20 (20 in the 1s window)", got)
	}
}

func TestRecoveryTime(t *testing.T) {
	const n = 500
	ok, bad, queue := fill(n, 10), fill(n, 0), fill(n, 3)
	// Fault over buckets [200, 250); failures go on until 300, and the
	// queue stays above the baseline's until 320.
	for i := 200; i < 300; i++ {
		ok[i], bad[i] = 0, 10
	}
	for i := 250; i < 320; i++ {
		queue[i] = 50
	}
	series := []outcomes{{ok, bad}}
	got, recovered := recoveryTime(series, queue, b10, 0, 200, 250, n)
	if !recovered || got != 700*time.Millisecond {
		t.Errorf("recovery = %v, %v; want 700ms (bucket 320)", got, recovered)
	}
	// A window must end by limit: with limit 400 the hold of 1s cannot fit.
	if _, recovered := recoveryTime(series, queue, b10, 0, 200, 250, 400); recovered {
		t.Error("recovered although no full hold window fits before the limit")
	}
	// Never healthy: stuck.
	for i := 300; i < n; i++ {
		ok[i], bad[i] = 5, 5
	}
	if _, recovered := recoveryTime(series, queue, b10, 0, 200, 250, n); recovered {
		t.Error("recovered at a 50% success rate")
	}
}

func TestSyncShare(t *testing.T) {
	if got := syncShare(fill(300, 1), b10); got != 0 {
		t.Errorf("spread retries: %v, want 0", got)
	}
	xs := make([]int32, 300)
	xs[100], xs[200] = 40, 40
	if got := syncShare(xs, b10); got != 1 {
		t.Errorf("two spikes: %v, want 1", got)
	}
	if got := syncShare(make([]int32, 10), b10); got != 0 {
		t.Errorf("no retries: %v, want 0", got)
	}
}

func TestKurtosis(t *testing.T) {
	if got := kurtosis(fill(10, 4)); got != 0 {
		t.Errorf("constant: %v, want 0", got)
	}
	// mean 1, deviations -1 -1 -1 3: m2 = 3, m4 = 21, m4/m2² = 7/3.
	if got := kurtosis([]int32{0, 0, 0, 4}); math.Abs(got-7.0/3) > 1e-12 {
		t.Errorf("kurtosis = %v, want 7/3", got)
	}
}

func TestPercentile(t *testing.T) {
	xs := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestSlope(t *testing.T) {
	if got := slope([]float64{1, 3, 5, 7}); got != 2 {
		t.Errorf("slope = %v, want 2", got)
	}
	if got := slope([]float64{4}); got != 0 {
		t.Errorf("one point: %v, want 0", got)
	}
}

func TestEntry(t *testing.T) {
	const n = 1000                             // 10s of 10ms buckets
	first, bad := fill(n, 2), make([]int32, n) // 200 first attempts/s
	e := entry(first, bad, b10, 100, 400, n)
	if e.ErrorsBeganS != -1 || e.Rising || e.BaselinePerS != 200 {
		t.Errorf("no errors: %+v", e)
	}
	bad[500] = 1
	e = entry(first, bad, b10, 100, 400, n)
	if e.ErrorsBeganS != 5 || e.Rising || e.AfterPerS != 200 || e.Growth != 1 || e.SlopePerS2 != 0 {
		t.Errorf("flat entry after errors: %+v", e)
	}
	// First attempts grow by 100/s every second after the errors begin.
	for i := 500; i < n; i++ {
		first[i] = 2 + int32((i-500)/100)
	}
	e = entry(first, bad, b10, 100, 400, n)
	if !e.Rising || e.SlopePerS2 != 100 || e.PeakPerS != 600 || e.Growth != 3 {
		t.Errorf("rising entry: %+v, want slope 100/s², peak 600/s, growth 3", e)
	}
}

// TestMeasure checks the sim.Metrics definitions on a recorded run.
func TestMeasure(t *testing.T) {
	sc := &Scenario{
		Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Clients: 1,
		Faults: []sim.Fault{{Kind: sim.FaultUnavailable, Start: time.Second, End: 1500 * time.Millisecond}},
	}
	const n = 400
	x := &raw{
		bucket:   b10,
		arrivals: fill(n, 1), retries: make([]int32, n),
		okCalls: fill(n, 1), badCalls: make([]int32, n),
		okAtts: fill(n, 1), badAtts: make([]int32, n),
		wasted:   make([]int64, n),
		inflight: make([]int32, n), conc: make([]int32, n), queue: make([]int32, n), busy: make([]int32, n),
		calls: 300, succeeded: 290, serverAtt: 400, serverRetry: 100, clientAtt: 400, clientRetry: 100,
		latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond},
		maxConc:   7, maxInflight: 9,
	}
	for i := 100; i < 150; i++ { // retries during the fault: 3 per bucket
		x.arrivals[i], x.retries[i] = 4, 3
		x.okAtts[i], x.badAtts[i] = 0, 4
	}
	m, s, e, l := measure(sc, x, 3*time.Second, faultinject.Counters{PeakWaiting: 5}, Duplicates{})
	if m.BaselineLoad != 100 {
		t.Errorf("baseline %v/s, want 100 (buckets 50-100)", m.BaselineLoad)
	}
	if m.PeakLoad != 250 || m.Amplification != 2.5 {
		t.Errorf("peak %v/s, amplification %v; want 250/s, 2.5", m.PeakLoad, m.Amplification)
	}
	if m.Attempts != 400 || m.Retries != 100 || m.AttemptsPerCall != 400.0/300 || m.Goodput != 290.0/3 {
		t.Errorf("metrics %+v", m)
	}
	if m.PeakConcurrency != 7 || m.PeakQueue != 5 || m.PeakInFlight != 9 {
		t.Errorf("peaks %v %v %v", m.PeakConcurrency, m.PeakQueue, m.PeakInFlight)
	}
	if m.Recovered != 1 || m.RecoveryS != 0 {
		t.Errorf("recovery %v, %v; want at once", m.Recovered, m.RecoveryS)
	}
	if m.P50ms != 1 || m.P99ms != 2 {
		t.Errorf("latency p50 %v p99 %v", m.P50ms, m.P99ms)
	}
	if len(s.Load) != 31 || s.Load[0] != 100 || s.Load[10] != 400 || s.Retries[10] != 300 || l.Entry[10] != 100 {
		t.Errorf("series at 100ms: load %v, retries %v, entry %v", s.Load[:12], s.Retries[:12], l.Entry[:12])
	}
	if e.Entry.ErrorsBeganS != 1 || e.Entry.Rising {
		t.Errorf("entry %+v", e.Entry)
	}
}
