package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestGaugeCarriesValuesForward(t *testing.T) {
	g := NewGauge(6)
	g.Set(0, 2)
	g.Set(0, 1)
	g.Set(3, 5)
	g.Set(3, 0)
	if g.Value() != 0 {
		t.Fatalf("value %d, want 0", g.Value())
	}
	got := g.Peaks()
	want := []int32{2, 1, 1, 5, 0, 0}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("peaks %v, want %v", got, want)
		}
	}
	var zero Gauge
	if p := zero.Peaks(); len(p) != 0 {
		t.Fatalf("zero gauge peaks %v", p)
	}
}

// TestRecordingMetrics checks the Metrics definitions on a hand-made
// recording: 4s of 10ms buckets, one attempt and one successful call per
// bucket, and 3 extra retries per bucket, all failing, during a fault in
// [1s, 1.5s).
func TestRecordingMetrics(t *testing.T) {
	const n = 400
	r := NewRecording(b10, n)
	for i := range n {
		r.Attempts[i], r.CallsOK[i], r.AttemptsOK[i] = 1, 1, 1
	}
	for i := 100; i < 150; i++ {
		r.Attempts[i], r.Retries[i] = 4, 3
		r.AttemptsOK[i], r.AttemptsFailed[i] = 0, 4
	}
	r.Concurrency[7], r.Queue[8], r.InFlight[9] = 7, 5, 9
	r.Calls = 410
	r.Latencies = []time.Duration{time.Millisecond, 2 * time.Millisecond}
	faults := []Fault{{Kind: FaultUnavailable, Start: time.Second, End: 1500 * time.Millisecond}}

	m := r.Metrics(500*time.Millisecond, 3*time.Second, faults)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"calls", m.Calls, 410},
		{"succeeded", m.Succeeded, 400},
		{"goodput (the 300 successes before 3s, over 3s)", m.Goodput, 100},
		{"success in run", m.SuccessInRun, 300.0 / 410},
		{"attempts", m.Attempts, 550},
		{"retries", m.Retries, 150},
		{"attempts per call", m.AttemptsPerCall, 550.0 / 410},
		{"baseline load (buckets 50-100)", m.BaselineLoad, 100},
		{"peak load", m.PeakLoad, 250},
		{"amplification", m.Amplification, 2.5},
		{"peak concurrency", m.PeakConcurrency, 7},
		{"peak queue", m.PeakQueue, 5},
		{"peak in flight", m.PeakInFlight, 9},
		{"recovered", m.Recovered, 1},
		{"recovery (at once)", m.RecoveryS, 0},
		{"p50", m.P50ms, 1},
		{"p99", m.P99ms, 2},
		{"sync (retries spread evenly)", m.SyncShare, 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Without faults there is nothing to recover from.
	if m := r.Metrics(0, 3*time.Second, nil); m.Recovered != 1 || m.BaselineLoad != 150 { // 450 attempts in [0, 3s)
		t.Errorf("no faults: %+v", m)
	}

	s := r.Series(301)
	if s.StepMS != 100 || len(s.Load) != 31 || s.Load[0] != 100 || s.Load[10] != 400 || s.Retries[10] != 300 || s.Goodput[5] != 100 {
		t.Errorf("series at 100ms: load %v, retries %v", s.Load[:12], s.Retries[:12])
	}
	if s.Queue[0] != 5 || s.InFlight[0] != 9 || s.Queue[1] != 0 {
		t.Errorf("gauges by step: queue %v, in flight %v", s.Queue[:2], s.InFlight[:2])
	}
	if all := r.Series(1 << 30); len(all.Load) != 40 {
		t.Errorf("series of every bucket: %d steps, want 40", len(all.Load))
	}
}

func TestRecordingIndexAndShapes(t *testing.T) {
	r := NewRecording(b10, 5)
	for _, c := range []struct {
		t    time.Duration
		want int
	}{{-time.Second, 0}, {0, 0}, {19 * time.Millisecond, 1}, {time.Hour, 4}} {
		if got := r.Index(c.t); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.t, got, c.want)
		}
	}
	empty := &Recording{Bucket: b10, Calls: 2}
	if m := empty.Metrics(0, time.Second, []Fault{{Start: 0, End: time.Second}}); m.Calls != 2 || m.Recovered != 0 || m.PeakLoad != 0 {
		t.Errorf("empty recording: %+v", m)
	}
	if s := empty.Series(10); len(s.Load) != 0 {
		t.Errorf("empty recording: series %+v", s)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "sim: Recording") {
			t.Fatalf("mismatched series: panic %v", p)
		}
	}()
	r.Queue = r.Queue[:3]
	r.Metrics(0, time.Second, nil)
}

func TestBaselineAndFaultWindow(t *testing.T) {
	faults := []Fault{{Start: 5 * time.Second, End: 6 * time.Second}, {Start: 3 * time.Second, End: 4 * time.Second}}
	if s, e, ok := FaultWindow(faults); !ok || s != 3*time.Second || e != 6*time.Second {
		t.Errorf("fault window %v %v %v", s, e, ok)
	}
	if _, _, ok := FaultWindow(nil); ok {
		t.Error("a fault window without faults")
	}
	if f, to := BaselineWindow(time.Second, 10*time.Second, faults); f != time.Second || to != 3*time.Second {
		t.Errorf("baseline [%v, %v)", f, to)
	}
	if f, to := BaselineWindow(4*time.Second, 10*time.Second, faults); f != 3*time.Second || to != 3*time.Second {
		t.Errorf("warmup past the fault: [%v, %v), want empty at 3s", f, to)
	}
	if f, to := BaselineWindow(0, 2*time.Second, faults); f != 0 || to != 2*time.Second {
		t.Errorf("fault after the duration: [%v, %v)", f, to)
	}
}

// TestLatencyRanksWithoutSortMatchSort: the recorder no longer sorts every
// call's latency (issue #36); the percentiles read at the places it
// selects are those of the sorted latencies, ties and tiny runs included.
func TestLatencyRanksWithoutSortMatchSort(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 3000).Draw(rt, "n")
		span := rapid.Int64Range(1, 1<<40).Draw(rt, "span")
		lat := make([]time.Duration, n)
		for i := range lat {
			lat[i] = time.Duration(rapid.Int64Range(0, span).Draw(rt, "v"))
		}
		if rapid.Bool().Draw(rt, "sorted") {
			slices.Sort(lat) // selection's worst orders: sorted and reversed
			if rapid.Bool().Draw(rt, "reversed") {
				slices.Reverse(lat)
			}
		}
		want := slices.Clone(lat)
		slices.Sort(want)
		placeLatencyRanks(lat)
		for _, p := range latencyRanks {
			if got, w := Percentile(lat, p), Percentile(want, p); got != w {
				rt.Fatalf("p%v of %d: %v, want %v", p, n, got, w)
			}
		}
		if n > 0 {
			slices.Sort(lat)
			if !slices.Equal(lat, want) {
				rt.Fatalf("the values changed")
			}
		}
	})
}
