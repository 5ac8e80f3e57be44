package live

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

const b10 = 10 * time.Millisecond

// fill returns n buckets holding v.
func fill(n int, v int32) []int32 { return slices.Repeat([]int32{v}, n) }

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

// TestMeasure checks what measure adds to sim.Recording.Metrics (whose
// definitions sim tests): the injector's queue peak, the live series and
// the accounting.
func TestMeasure(t *testing.T) {
	sc := &Scenario{
		Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Clients: 1,
		Faults: []sim.Fault{{Kind: sim.FaultUnavailable, Start: time.Second, End: 1500 * time.Millisecond}},
	}
	const n = 400
	rec := sim.NewRecording(b10, n)
	copy(rec.Attempts, fill(n, 1))
	copy(rec.CallsOK, fill(n, 1))
	copy(rec.AttemptsOK, fill(n, 1))
	rec.Calls, rec.Queue[3], rec.Concurrency[250] = 300, 2, 7
	rec.Latencies = []time.Duration{time.Millisecond, 2 * time.Millisecond}
	x := &raw{
		rec: rec, wasted: make([]int64, n), busy: make([]int32, n),
		serverAtt: 400, serverRetry: 100, clientAtt: 400, clientRetry: 100,
		handler: 4 * time.Second, wastedTotal: time.Second, lagTotal: 300 * time.Millisecond, lagMax: 20 * time.Millisecond,
	}
	for i := 100; i < 150; i++ { // retries during the fault: 3 per bucket
		rec.Attempts[i], rec.Retries[i] = 4, 3
		rec.AttemptsOK[i], rec.AttemptsFailed[i] = 0, 4
	}
	x.wasted[105], x.busy[105] = int64(50*time.Millisecond), 6
	m, s, e, l := measure(sc, x, 3*time.Second, faultinject.Counters{PeakWaiting: 5}, Duplicates{DuplicateExecutions: 2})
	if m.PeakLoad != 250 || m.Amplification != 2.5 || m.PeakConcurrency != 7 {
		t.Errorf("metrics %+v", m)
	}
	if m.PeakQueue != 5 {
		t.Errorf("peak queue %v, want the injector's 5 (above the sampled 2)", m.PeakQueue)
	}
	if want := sim.PeakRate(rec.Attempts, b10, sim.PeakWindow); m.PeakLoad != want {
		t.Errorf("peak %v, sim.PeakRate %v", m.PeakLoad, want)
	}
	if len(s.Load) != 31 || s.Load[0] != 100 || s.Load[10] != 400 || s.Retries[10] != 300 || l.Entry[10] != 100 {
		t.Errorf("series at 100ms: load %v, retries %v, entry %v", s.Load[:12], s.Retries[:12], l.Entry[:12])
	}
	if len(l.Wasted) != 31 || math.Abs(l.Wasted[10]-0.5) > 1e-12 || l.Busy[10] != 6 || l.Concurrency[25] != 7 {
		t.Errorf("live series: wasted %v, busy %v", l.Wasted[:12], l.Busy[:12])
	}
	if e.Entry.ErrorsBeganS != 1 || e.Entry.Rising || e.Entry.BaselinePerS != 100 {
		t.Errorf("entry %+v", e.Entry)
	}
	if e.Wasted.Share != 0.25 || e.StartLagMeanMS != 1 || e.StartLagMaxMS != 20 || e.Duplicates.DuplicateExecutions != 2 || e.ServerRetries != 100 {
		t.Errorf("extra %+v", e)
	}
}
