package sim

import (
	"slices"
	"time"
)

// recorder collects a run's raw counts in fixed time buckets (Model.Bucket,
// 10ms by default). Counters are indexed by the bucket an event falls in;
// gauges keep the highest value each bucket saw.
type recorder struct {
	bucket time.Duration
	n      int

	offered []int32 // attempts sent to the measured tier, by send time
	retries []int32 // of which retries
	okCalls []int32 // client calls that ended in success, by end time
	badCall []int32 // client calls that ended in failure, by end time
	okAtts  []int32 // attempts to the measured tier that succeeded, by end time
	badAtts []int32 // attempts to the measured tier that failed or timed out

	conc     gauge // measured tier: busy workers + queued
	queue    gauge // measured tier: queued
	inflight gauge // attempts in flight towards the measured tier
	inflCur  int32

	latencies []time.Duration // client call latencies, in end order
	calls     int64
	succeeded int64
	attempts  int64
	retried   int64
}

// gauge records the highest value per bucket of a quantity that changes at
// events; buckets without events carry the last value forward.
type gauge struct {
	peak []int32
	cur  int32
	last int
}

func (g *gauge) init(n int) { g.peak = make([]int32, n) }

func (g *gauge) set(b int, v int32) {
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

func (g *gauge) finish() {
	for i := g.last + 1; i < len(g.peak); i++ {
		g.peak[i] = g.cur
	}
	g.last = len(g.peak) - 1
}

func (r *recorder) init(m *Model) {
	r.bucket = m.bucket()
	r.n = int((m.horizon()+r.bucket-1)/r.bucket) + 1
	r.offered = make([]int32, r.n)
	r.retries = make([]int32, r.n)
	r.okCalls = make([]int32, r.n)
	r.badCall = make([]int32, r.n)
	r.okAtts = make([]int32, r.n)
	r.badAtts = make([]int32, r.n)
	r.conc.init(r.n)
	r.queue.init(r.n)
	r.inflight.init(r.n)
}

func (r *recorder) idx(t time.Duration) int {
	return min(int(t/r.bucket), r.n-1)
}

func (r *recorder) attemptSent(t time.Duration, retry bool) {
	b := r.idx(t)
	r.offered[b]++
	r.attempts++
	if retry {
		r.retries[b]++
		r.retried++
	}
	r.inflCur++
	r.inflight.set(b, r.inflCur)
}

func (r *recorder) attemptEnded(t time.Duration, ok bool) {
	b := r.idx(t)
	if ok {
		r.okAtts[b]++
	} else {
		r.badAtts[b]++
	}
	r.inflCur--
	r.inflight.set(b, r.inflCur)
}

func (r *recorder) server(t time.Duration, busy, queued int) {
	b := r.idx(t)
	r.conc.set(b, int32(busy+queued))
	r.queue.set(b, int32(queued))
}

func (r *recorder) callStarted() { r.calls++ }

func (r *recorder) callEnded(t, latency time.Duration, ok bool) {
	b := r.idx(t)
	if ok {
		r.okCalls[b]++
		r.succeeded++
	} else {
		r.badCall[b]++
	}
	r.latencies = append(r.latencies, latency)
}

// finish computes the run's metrics and chart series.
func (r *recorder) finish(m *Model) (Metrics, Series) {
	r.conc.finish()
	r.queue.finish()
	r.inflight.finish()
	slices.Sort(r.latencies)
	return r.metrics(m), r.series(m)
}
