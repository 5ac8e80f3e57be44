package sim

import (
	"math"
	"slices"
	"sync"
	"time"
)

// latencyBufs keeps the latency buffers of finished runs for the next
// ones: a run's call latencies are most of what it allocates, and
// growing them anew in every trial made the garbage collector's work a
// tenth of the default suite's instructions (issue #36).
var latencyBufs sync.Pool // of *[]time.Duration

// recorder collects a run's raw counts in fixed time buckets (Model.Bucket,
// 10ms by default) into a Recording. Counters are indexed by the bucket an
// event falls in; gauges keep the highest value each bucket saw.
type recorder struct {
	rec Recording
	n   int
	// The bucket idx returned last (b) and the times it spans, [lo, hi):
	// a run's events come in time order, so that most lookups are of the
	// same bucket and need no division.
	b      int
	lo, hi time.Duration

	conc     Gauge // measured tier: busy workers + queued
	queue    Gauge // measured tier: queued
	inflight Gauge // attempts in flight towards the measured tier
}

func (r *recorder) init(m *Model) {
	bucket := m.bucket()
	r.n = int((m.horizon()+bucket-1)/bucket) + 1
	r.rec = *NewRecording(bucket, r.n)
	r.b, r.lo, r.hi = 0, 0, 0
	r.rec.QueueSlack = QueueSlackFor(m.Tiers[m.MeasureTier()].Workers)
	r.rec.RecoveryTolerance = m.RecoveryTolerance
	if b, ok := latencyBufs.Get().(*[]time.Duration); ok {
		r.rec.Latencies = (*b)[:0]
	}
	if _, _, ok := FaultWindow(m.Faults); ok && len(m.Tiers) > 1 {
		r.rec.FaultTierAttempts = make([]int64, len(m.Tiers))
	}
	// The gauges fill the recording's own series.
	r.conc = Gauge{peak: r.rec.Concurrency}
	r.queue = Gauge{peak: r.rec.Queue}
	r.inflight = Gauge{peak: r.rec.InFlight}
}

// QueueSlackFor returns the Recording.QueueSlack of a tier with workers
// workers (0: unlimited, which never queues).
func QueueSlackFor(workers int) int32 {
	return int32(math.Ceil(RecoveryQueueShare * float64(workers)))
}

// idx returns the bucket of time t: min(t/Bucket, n-1).
func (r *recorder) idx(t time.Duration) int {
	if t >= r.lo && t < r.hi {
		return r.b
	}
	b := min(int(t/r.rec.Bucket), r.n-1)
	if t >= 0 {
		r.b, r.lo, r.hi = b, time.Duration(b)*r.rec.Bucket, time.Duration(b+1)*r.rec.Bucket
		if b == r.n-1 {
			r.hi = math.MaxInt64
		}
	}
	return b
}

func (r *recorder) attemptSent(t time.Duration, retry bool) {
	b := r.idx(t)
	r.rec.Attempts[b]++
	if retry {
		r.rec.Retries[b]++
	}
	r.inflight.Set(b, r.inflight.Value()+1)
}

func (r *recorder) attemptEnded(t time.Duration, ok bool) {
	b := r.idx(t)
	if ok {
		r.rec.AttemptsOK[b]++
	} else {
		r.rec.AttemptsFailed[b]++
	}
	r.inflight.Set(b, r.inflight.Value()-1)
}

// attemptCancelled counts out of the in-flight gauge an attempt its caller
// cancelled (neither a success nor a failure).
func (r *recorder) attemptCancelled(t time.Duration) {
	r.inflight.Set(r.idx(t), r.inflight.Value()-1)
}

func (r *recorder) server(t time.Duration, busy, queued int) {
	b := r.idx(t)
	r.conc.Set(b, int32(busy+queued))
	r.queue.Set(b, int32(queued))
}

func (r *recorder) callStarted() { r.rec.Calls++ }

func (r *recorder) callEnded(t, latency time.Duration, ok bool) {
	b := r.idx(t)
	if ok {
		r.rec.CallsOK[b]++
	} else {
		r.rec.CallsFailed[b]++
	}
	r.rec.Latencies = append(r.rec.Latencies, latency)
}

// finish computes the run's metrics and chart series.
func (r *recorder) finish(m *Model) (Metrics, Series) {
	r.conc.Peaks()
	r.queue.Peaks()
	r.inflight.Peaks()
	if len(r.rec.Open) == 0 {
		// Metrics reads only the latencies at its ranks: the Recording
		// never leaves the recorder.
		placeLatencyRanks(r.rec.Latencies)
	} else {
		slices.Sort(r.rec.Latencies)
		slices.Sort(r.rec.Open)
	}
	faults := m.Faults
	if m.windows != nil {
		faults = m.windows
	}
	x, series := r.rec.Metrics(m.Warmup, m.Duration, faults), r.rec.Series(r.n)
	// Nothing returned refers to the latencies: their buffer serves the
	// next run.
	b := r.rec.Latencies[:0]
	r.rec.Latencies = nil
	latencyBufs.Put(&b)
	return x, series
}
