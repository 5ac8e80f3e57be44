package sim

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Recording is a run's raw record: counts and gauges in consecutive time
// buckets of width Bucket from the start of the run, the number of calls
// and the calls' latencies. Metrics and Series compute from it the
// measures that Metrics and Series document.
//
// The simulator fills one for every run. A harness that measures real
// traffic (the live package) fills one from what it saw and gets the same
// numbers by the same definitions.
//
// Every per-bucket slice has Len() elements (NewRecording allocates them);
// an event belongs to the bucket Index(t) of the time t it happened.
type Recording struct {
	// Bucket is the width of a bucket (Model.Bucket: 10ms by default).
	Bucket time.Duration

	// Counts per bucket. Attempts are the attempts sent to (or arriving
	// at) the measured tier, by send time, first tries and retries;
	// Retries the part of them that were retries.
	Attempts, Retries []int32
	// CallsOK and CallsFailed count the client calls that ended in success
	// or failure, by end time.
	CallsOK, CallsFailed []int32
	// AttemptsOK and AttemptsFailed count the attempts to the measured
	// tier that ended in success or in failure (an error or a timeout), by
	// end time, as the callers saw them.
	AttemptsOK, AttemptsFailed []int32

	// Gauges: the highest value each bucket saw (see Gauge). Concurrency
	// is the requests inside the measured tier (in service and queued),
	// Queue its queue, InFlight the attempts in flight towards it.
	Concurrency, Queue, InFlight []int32

	// Calls is the number of calls the clients started, including those
	// still open at the end of the run (they count as failed).
	Calls int64
	// Latencies are the latencies of the calls that ended, successful or
	// not: sorted in ascending order, except in a Recording a run's
	// recorder made while no call was open at the end, where only the
	// ranks of p50, p99 and p999 are in place (the values below each are
	// smaller, those above larger, in no order).
	Latencies []time.Duration
	// Open are the ages at the end of the run of the calls still open
	// then (lower bounds of their latencies), sorted in ascending order.
	Open []time.Duration

	// FaultCalls counts the client calls started inside the fault window
	// (FaultWindow), and FaultAttempts the attempts those calls caused at
	// the measured tier, through every tier in between (the simulator
	// fills them; 0 when not measured).
	FaultCalls, FaultAttempts int64
	// FaultTierAttempts counts, for a chain of several tiers, the attempts
	// the fault window's client calls caused at each tier, outermost
	// first (the simulator fills it; nil for one tier or when not
	// measured).
	FaultTierAttempts []int64
	// LocalRejected counts the attempts towards the measured tier that a
	// client-side limiter (Policy.Limiter) refused before they were sent.
	LocalRejected int64

	// RecoveryTolerance is how long a recovery may take after the fault
	// and still be a recovery to wait for (slow, not stuck): a run that
	// has not recovered is judged stuck only when its traffic went on for
	// at least RecoveryTolerance + StuckMargin after the fault, and
	// unobserved otherwise. 0: DefaultRecoveryTolerance.
	RecoveryTolerance time.Duration

	// QueueSlack is how much longer than the baseline's longest queue the
	// queue may be for the backlog to count as drained when recovery is
	// judged (see RecoveryTimeSlack): RecoveryQueueShare of the measured
	// tier's workers, set by the simulator and the live lab alike. 0: none.
	QueueSlack int32

	// With a report queue (Model.Reports): the reports offered, delivered
	// (Delayed of them after a delivery that gave up had put them back),
	// dropped by a full buffer, and still pending at the end.
	ReportsOffered, ReportsDelivered, ReportsDelayed, ReportsDropped, ReportsPending int64
}

// latencyRanks are the latency quantiles Metrics reports, in ascending
// order: p50, p99 and p999.
var latencyRanks = [3]float64{0.50, 0.99, 0.999}

// placeLatencyRanks reorders lat so that the values at the nearest ranks
// of latencyRanks are those the sorted lat has there (every value before
// such a place at most it, every one after at least it), which is all
// Metrics reads of Latencies when Open is empty: a few passes of
// selection instead of a sort of every call's latency (issue #36).
func placeLatencyRanks(lat []time.Duration) {
	lo := 0
	for _, p := range latencyRanks {
		k := nearestRank(len(lat), p)
		if k < lo {
			continue // placed already: the rank below is the same
		}
		// lat[lo:] holds every value at least lat[lo-1]: rank k is
		// among them, and each selection works on what is above the
		// last (half the values, then a hundredth).
		selectNth(lat[lo:], k-lo)
		lo = k + 1
	}
}

// selectNth reorders a so that a[k] is the value the sorted a has there,
// every value before it at most it and every one after it at least it:
// quickselect with three-way partitions (ties are common), falling back
// to a sort of what is left when the partitions go badly.
func selectNth(a []time.Duration, k int) {
	lo, hi := 0, len(a)
	for budget := 2*bits.Len(uint(len(a))) + 4; hi-lo > 12; budget-- {
		if budget == 0 {
			break
		}
		m := lo + (hi-lo)/2
		p := median3(a[lo], a[m], a[hi-1])
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch v := a[i]; {
			case v < p:
				a[lt], a[i] = v, a[lt]
				lt++
				i++
			case v > p:
				gt--
				a[i], a[gt] = a[gt], v
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return // a[lt:gt] are all p
		}
	}
	slices.Sort(a[lo:hi])
}

func median3(a, b, c time.Duration) time.Duration {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}

// latencyPercentile is the nearest-rank p-quantile of every call's
// latency, the calls still open at the end included with their ages at
// the end: open reports that the quantile fell on such a call, whose
// value is then only a lower bound.
func (r *Recording) latencyPercentile(p float64) (d time.Duration, open bool) {
	if len(r.Open) == 0 {
		return Percentile(r.Latencies, p), false
	}
	n := len(r.Latencies) + len(r.Open)
	k := nearestRank(n, p)
	// Merge the two sorted lists up to rank k.
	i, j := 0, 0
	for {
		takeOpen := i >= len(r.Latencies) || (j < len(r.Open) && r.Open[j] < r.Latencies[i])
		if i+j == k {
			if takeOpen {
				return r.Open[j], true
			}
			return r.Latencies[i], false
		}
		if takeOpen {
			j++
		} else {
			i++
		}
	}
}

// NewRecording returns a Recording of n buckets of width bucket, with
// every per-bucket slice allocated.
func NewRecording(bucket time.Duration, n int) *Recording {
	mk := func() []int32 { return make([]int32, n) }
	return &Recording{
		Bucket:   bucket,
		Attempts: mk(), Retries: mk(),
		CallsOK: mk(), CallsFailed: mk(),
		AttemptsOK: mk(), AttemptsFailed: mk(),
		Concurrency: mk(), Queue: mk(), InFlight: mk(),
	}
}

// Gauge records, per time bucket, the highest value of a quantity that
// changes at events (requests inside a server, attempts in flight): call
// Set at every change; a bucket without a change carries the last value
// forward. Peaks returns the series, the shape of Recording's gauges. The
// zero Gauge has no buckets; NewGauge makes one. A Gauge is not safe for
// concurrent use.
type Gauge struct {
	peak []int32
	cur  int32
	last int
}

// NewGauge returns a Gauge of n buckets, at 0.
func NewGauge(n int) Gauge { return Gauge{peak: make([]int32, n)} }

// Set records that the quantity became v during bucket b, which must be in
// [0, n). Buckets are expected in order; a bucket earlier than the latest
// one only raises its own peak.
func (g *Gauge) Set(b int, v int32) {
	if b > g.last {
		for i := g.last + 1; i <= b; i++ {
			g.peak[i] = g.cur
		}
		g.last = b
	}
	g.cur = v
	if v > g.peak[b] {
		g.peak[b] = v
	}
}

// Value returns the quantity's current value: the last one Set.
func (g *Gauge) Value() int32 { return g.cur }

// Peaks carries the current value forward to the last bucket and returns
// the highest value of each bucket: the Gauge's own slice.
func (g *Gauge) Peaks() []int32 {
	for i := g.last + 1; i < len(g.peak); i++ {
		g.peak[i] = g.cur
	}
	g.last = max(len(g.peak)-1, 0)
	return g.peak
}

// Len returns the number of buckets.
func (r *Recording) Len() int { return len(r.Attempts) }

// Index returns the bucket of time t: t/Bucket, within [0, Len()-1] (the
// last bucket takes everything after it).
func (r *Recording) Index(t time.Duration) int {
	if r.Bucket <= 0 {
		return 0
	}
	return max(min(int(t/r.Bucket), r.Len()-1), 0)
}

// check panics unless every per-bucket slice has Len() elements.
func (r *Recording) check() {
	n := r.Len()
	for _, s := range [][]int32{r.Retries, r.CallsOK, r.CallsFailed, r.AttemptsOK, r.AttemptsFailed, r.Concurrency, r.Queue, r.InFlight} {
		if len(s) != n {
			panic(fmt.Sprintf("sim: Recording series of %d and %d buckets", n, len(s)))
		}
	}
}

// Metrics computes the run's Metrics as their fields define them, for a
// workload that started calls for duration, whose baseline window is
// [warmup, first fault) (see BaselineWindow), and whose recovery is judged
// from the end of the last of faults. It panics if the per-bucket slices
// differ in length.
func (r *Recording) Metrics(warmup, duration time.Duration, faults []Fault) Metrics {
	r.check()
	var x Metrics
	x.Trials = 1
	x.Calls = float64(r.Calls)
	x.Succeeded = float64(sum32(r.CallsOK))
	x.SuccessRate = ratio(x.Succeeded, x.Calls)
	inRun := float64(sum32(r.CallsOK[:min(r.Index(duration), r.Len())]))
	x.SuccessInRun = ratio(inRun, x.Calls)
	x.Goodput = ratio(inRun, duration.Seconds())
	x.Attempts = float64(sum32(r.Attempts))
	x.Retries = float64(sum32(r.Retries))
	x.AttemptsPerCall = ratio(x.Attempts, x.Calls)
	x.FaultAttemptsPerCall = ratio(float64(r.FaultAttempts), float64(r.FaultCalls))
	if r.FaultTierAttempts != nil && r.FaultCalls > 0 {
		for i, a := range r.FaultTierAttempts[:min(len(r.FaultTierAttempts), 16)] {
			x.FaultTierAttemptsPerCall.v[i] = ratio(float64(a), float64(r.FaultCalls))
		}
		x.FaultTierAttemptsPerCall.n = uint8(min(len(r.FaultTierAttempts), 16))
	}
	if r.LocalRejected > 0 {
		x.LocalRejected = ratio(float64(r.LocalRejected), float64(r.LocalRejected)+x.Attempts)
	}
	if r.ReportsOffered > 0 {
		n := float64(r.ReportsOffered)
		x.Reports = float64(r.ReportsOffered)
		x.ReportsDelivered = float64(r.ReportsDelivered) / n
		x.ReportsDelayed = float64(r.ReportsDelayed) / n
		x.ReportsDropped = float64(r.ReportsDropped) / n
		x.ReportsPending = float64(r.ReportsPending) / n
	}

	from, to := BaselineWindow(warmup, duration, faults)
	bf, bt := r.Index(from), r.Index(to)
	x.BaselineLoad = ratio(float64(sum32(r.Attempts[bf:bt])), (time.Duration(bt-bf) * r.Bucket).Seconds())
	x.PeakLoad = PeakRate(r.Attempts, r.Bucket, PeakWindow)
	x.Amplification = ratio(x.PeakLoad, x.BaselineLoad)
	x.PeakConcurrency = float64(max32(r.Concurrency))
	x.PeakQueue = float64(max32(r.Queue))
	x.PeakInFlight = float64(max32(r.InFlight))

	x.Recovered = 1
	if _, end, ok := FaultWindow(faults); ok && r.Index(end) < r.Len() {
		x.PeakLoadAfter = PeakRate(r.Attempts[r.Index(end):], r.Bucket, PeakWindow)
		x.AmplificationAfter = ratio(x.PeakLoadAfter, x.BaselineLoad)
	}
	if _, end, ok := FaultWindow(faults); ok {
		judged := []Outcomes{{r.CallsOK, r.CallsFailed}, {r.AttemptsOK, r.AttemptsFailed}}
		rec, ok := RecoveryTimeSlack(judged, r.Queue, r.QueueSlack, r.Bucket, bf, bt, r.Index(end), r.Index(duration))
		switch {
		case ok:
			x.RecoveryS = rec.Seconds()
		case duration-end < StuckWindow(r.RecoveryTolerance):
			// Too short a window of traffic after the fault to tell a
			// slow recovery from none.
			x.Recovered, x.Unobserved = 0, 1
		default:
			x.Recovered = 0
		}
	}
	x.OpenCalls = float64(len(r.Open))
	for _, q := range []struct {
		p         float64
		val, open *float64
	}{{latencyRanks[0], &x.P50ms, &x.P50Open}, {latencyRanks[1], &x.P99ms, &x.P99Open}, {latencyRanks[2], &x.P999ms, &x.P999Open}} {
		d, open := r.latencyPercentile(q.p)
		*q.val = ms(d)
		if open {
			*q.open = 1
		}
	}
	x.SyncShare = SyncShare(r.Retries, r.Bucket)
	load := r.Attempts[:r.Index(duration)]
	x.Kurtosis = Kurtosis(load)
	if lambda := ratio(float64(sum32(load)), float64(len(load))); lambda > 0 {
		x.KurtosisPoisson = 3 + 1/lambda
	}
	return x
}

// Defaults of the stuck rule (Recording.RecoveryTolerance).
const (
	// DefaultRecoveryTolerance is the recovery tolerance of a model that
	// sets none.
	DefaultRecoveryTolerance = 10 * time.Second
	// StuckMargin is the observation beyond the tolerance that a run
	// needs before a system that has not recovered is called stuck.
	StuckMargin = 10 * time.Second
)

// StuckWindow returns how long the traffic must go on after the fault
// for a run that has not recovered to count as stuck rather than
// unobserved: tolerance (0: DefaultRecoveryTolerance) + StuckMargin.
func StuckWindow(tolerance time.Duration) time.Duration {
	if tolerance <= 0 {
		tolerance = DefaultRecoveryTolerance
	}
	return satAdd(tolerance, StuckMargin)
}

// satAdd adds two non-negative durations, saturating at the largest.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Series returns the load over the first n buckets (all of them when n is
// larger) at ChartStep resolution: counts become rates per second,
// gauges keep the highest value of each step. It panics if the per-bucket
// slices differ in length.
func (r *Recording) Series(n int) Series {
	r.check()
	n = min(max(n, 0), r.Len())
	st := newSteps(r.Bucket, n)
	return Series{
		StepMS:   ms(st.width),
		Load:     st.rates(r.Attempts),
		Retries:  st.rates(r.Retries),
		Goodput:  st.rates(r.CallsOK),
		Failed:   st.rates(r.CallsFailed),
		Queue:    st.peaks(r.Queue),
		InFlight: st.peaks(r.InFlight),
	}
}

// steps groups the buckets of a chart series into steps of ChartStep (or
// of one bucket when buckets are wider).
type steps struct {
	k     int // buckets per step
	n     int // buckets covered
	width time.Duration
	perS  float64 // 1 / width in seconds
}

func newSteps(bucket time.Duration, n int) steps {
	k := 1
	if bucket > 0 {
		k = max(int(ChartStep/bucket), 1)
	}
	width := time.Duration(k) * bucket
	var perS float64
	if width > 0 {
		perS = 1 / width.Seconds()
	}
	return steps{k: k, n: n, width: width, perS: perS}
}

// len is the number of steps.
func (s steps) len() int { return (s.n + s.k - 1) / s.k }

// rates returns the counts per second in each step of counts per bucket.
func (s steps) rates(counts []int32) []float64 {
	out := make([]float64, s.len())
	for i, c := range counts[:s.n] {
		out[i/s.k] += float64(c) * s.perS
	}
	return out
}

// peaks returns the highest value in each step of values per bucket.
func (s steps) peaks(values []int32) []float64 {
	out := make([]float64, s.len())
	for i, v := range values[:s.n] {
		out[i/s.k] = max(out[i/s.k], float64(v))
	}
	return out
}

// FaultWindow returns the earliest start and the latest end of faults, or
// ok=false when there are none.
func FaultWindow(faults []Fault) (start, end time.Duration, ok bool) {
	for i, f := range faults {
		if i == 0 || f.Start < start {
			start = f.Start
		}
		if i == 0 || f.End > end {
			end = f.End
		}
	}
	return start, end, len(faults) > 0
}

// BaselineWindow returns the baseline window of a workload that starts
// calls for duration: [warmup, the earliest fault start), or [warmup,
// duration) without faults, cut to duration. Metrics.BaselineLoad is the
// load in it, and recovery is judged against it.
func BaselineWindow(warmup, duration time.Duration, faults []Fault) (from, to time.Duration) {
	to = duration
	if s, _, ok := FaultWindow(faults); ok && s < to {
		to = s
	}
	return min(warmup, to), to
}
