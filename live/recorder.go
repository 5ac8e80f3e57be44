package live

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// recorder collects one policy's run in fixed time buckets
// (sim.DefaultBucket, 10ms), from the client goroutines, the server's
// handlers and the sampler at once. Counters are atomic; gauges and
// latencies take a mutex.
type recorder struct {
	start  time.Time
	bucket time.Duration
	n      int

	// Per bucket.
	arrivals []atomic.Int32 // attempts arriving at the server, by arrival time
	arrRetry []atomic.Int32 // of which retries (attempt header > 1)
	okCalls  []atomic.Int32 // calls that ended in success, by end time
	badCalls []atomic.Int32 // calls that ended in failure, by end time
	okAtts   []atomic.Int32 // attempts that got a 2xx, as the client saw them, by end time
	badAtts  []atomic.Int32 // attempts that failed or timed out, by end time
	wasted   []atomic.Int64 // handler nanoseconds after the caller gave up, by execution end

	gmu      sync.Mutex
	inflight sim.Gauge // attempts in flight at the clients (open requests)
	conc     sim.Gauge // requests inside the server (queued, in service, hanging)
	queue    sim.Gauge // requests waiting for a worker, at every change (as sim records it)
	waiting  int32     // requests waiting now

	queueSlack int32     // sim.Recording.QueueSlack, from the server's workers
	busy       sim.Gauge // the faultinject workers in use, sampled

	lmu       sync.Mutex
	latencies []time.Duration

	calls, reissues               atomic.Int64
	clientAttempts, clientRetries atomic.Int64
	clientSent, clientSentRetries atomic.Int64
	serverAttempts, serverRetries atomic.Int64
	lost, repliesLost             atomic.Int64
	reports                       [5]atomic.Int64 // offered, delivered, delayed, dropped, pending
	lagNS, lagMaxNS               atomic.Int64    // how late calls started

	executions, cancelled, abandoned, failedExec atomic.Int64
	handlerNS, wastedNS                          atomic.Int64
}

func newRecorder(start time.Time, bucket, horizon time.Duration) *recorder {
	n := int((horizon+bucket-1)/bucket) + 1
	return &recorder{
		start: start, bucket: bucket, n: n,
		arrivals: make([]atomic.Int32, n),
		arrRetry: make([]atomic.Int32, n),
		okCalls:  make([]atomic.Int32, n),
		badCalls: make([]atomic.Int32, n),
		okAtts:   make([]atomic.Int32, n),
		badAtts:  make([]atomic.Int32, n),
		wasted:   make([]atomic.Int64, n),
		inflight: sim.NewGauge(n),
		conc:     sim.NewGauge(n),
		queue:    sim.NewGauge(n),
		busy:     sim.NewGauge(n),
	}
}

// since returns the time since the start of the run.
func (r *recorder) since() time.Duration { return time.Since(r.start) }

func (r *recorder) idx(t time.Duration) int {
	return min(max(int(t/r.bucket), 0), r.n-1)
}

// Client side.

func (r *recorder) callStarted() { r.calls.Add(1) }

// started records how late a call planned at at started.
func (r *recorder) started(at time.Duration) {
	lag := int64(r.since() - at)
	r.lagNS.Add(lag)
	for {
		m := r.lagMaxNS.Load()
		if lag <= m || r.lagMaxNS.CompareAndSwap(m, lag) {
			return
		}
	}
}

func (r *recorder) callEnded(latency time.Duration, ok bool) {
	b := r.idx(r.since())
	if ok {
		r.okCalls[b].Add(1)
	} else {
		r.badCalls[b].Add(1)
	}
	r.lmu.Lock()
	r.latencies = append(r.latencies, latency)
	r.lmu.Unlock()
}

// written counts an attempt written on a connection.
func (r *recorder) written(retry bool) {
	r.clientSent.Add(1)
	if retry {
		r.clientSentRetries.Add(1)
	}
}

// attemptSent counts an attempt handed to the transport and enters the
// in-flight gauge; attemptEnded leaves it.
func (r *recorder) attemptSent(retry bool) {
	r.clientAttempts.Add(1)
	if retry {
		r.clientRetries.Add(1)
	}
	r.gmu.Lock()
	r.inflight.Set(r.idx(r.since()), r.inflight.Value()+1)
	r.gmu.Unlock()
}

func (r *recorder) attemptEnded(ok bool) {
	r.gmu.Lock()
	b := r.idx(r.since())
	r.inflight.Set(b, r.inflight.Value()-1)
	r.gmu.Unlock()
	if ok {
		r.okAtts[b].Add(1)
	} else {
		r.badAtts[b].Add(1)
	}
}

// Server side.

// arrived counts an attempt reaching the server and enters the
// concurrency gauge; left leaves it.
func (r *recorder) arrived(retry bool) {
	r.serverAttempts.Add(1)
	r.gmu.Lock()
	b := r.idx(r.since())
	r.conc.Set(b, r.conc.Value()+1)
	r.gmu.Unlock()
	r.arrivals[b].Add(1)
	if retry {
		r.serverRetries.Add(1)
		r.arrRetry[b].Add(1)
	}
}

func (r *recorder) left() {
	r.gmu.Lock()
	r.conc.Set(r.idx(r.since()), r.conc.Value()-1)
	r.gmu.Unlock()
}

// executed records one run of the work handler: its span on the handler,
// and how much of it came after the caller gave up.
func (r *recorder) executed(span, wasted time.Duration, cancelled, abandoned, failed bool) {
	r.executions.Add(1)
	r.handlerNS.Add(int64(span))
	if cancelled {
		r.cancelled.Add(1)
	}
	if abandoned {
		r.abandoned.Add(1)
	}
	if failed {
		r.failedExec.Add(1)
	}
	if wasted > 0 {
		r.wastedNS.Add(int64(wasted))
		r.wasted[r.idx(r.since())].Add(int64(wasted))
	}
}

// sampled records the server's busy workers (sampled).
func (r *recorder) sampled(inFlight int) {
	r.gmu.Lock()
	r.busy.Set(r.idx(r.since()), int32(inFlight))
	r.gmu.Unlock()
}

// queueChanged records that the requests waiting for a worker changed by
// delta: the queue's gauge follows every change, as the simulator's does,
// so that both modes measure the queue the same way (a sampled queue
// misses short peaks).
func (r *recorder) queueChanged(delta int32) {
	r.gmu.Lock()
	r.waiting += delta
	r.queue.Set(r.idx(r.since()), r.waiting)
	r.gmu.Unlock()
}

// raw is a recorder's content once the run is over: a sim.Recording of
// the attempts arriving at the server (their outcomes and the calls as the
// clients saw them) and the live-only counts.
type raw struct {
	rec                    *sim.Recording
	wasted                 []int64 // handler nanoseconds wasted, per bucket
	busy                   []int32 // busy workers, per bucket
	reissues               int64
	clientAtt, clientRetry int64
	clientSent, sentRetry  int64
	serverAtt, serverRetry int64
	lost, repliesLost      int64
	executions, cancelled  int64
	abandoned, failedExec  int64
	handler, wastedTotal   time.Duration
	lagTotal, lagMax       time.Duration
}

func load32(xs []atomic.Int32) []int32 {
	out := make([]int32, len(xs))
	for i := range xs {
		out[i] = xs[i].Load()
	}
	return out
}

// finish returns the recorded run. Nothing may record afterwards.
func (r *recorder) finish() *raw {
	rec := &sim.Recording{
		Bucket:   r.bucket,
		Attempts: load32(r.arrivals), Retries: load32(r.arrRetry),
		CallsOK: load32(r.okCalls), CallsFailed: load32(r.badCalls),
		AttemptsOK: load32(r.okAtts), AttemptsFailed: load32(r.badAtts),
		Calls: r.calls.Load(), QueueSlack: r.queueSlack,
	}
	rec.ReportsOffered, rec.ReportsDelivered, rec.ReportsDelayed = r.reports[0].Load(), r.reports[1].Load(), r.reports[2].Load()
	rec.ReportsDropped, rec.ReportsPending = r.reports[3].Load(), r.reports[4].Load()
	x := &raw{
		rec:       rec,
		wasted:    make([]int64, r.n),
		reissues:  r.reissues.Load(),
		clientAtt: r.clientAttempts.Load(), clientRetry: r.clientRetries.Load(),
		clientSent: r.clientSent.Load(), sentRetry: r.clientSentRetries.Load(),
		serverAtt: r.serverAttempts.Load(), serverRetry: r.serverRetries.Load(),
		lost: r.lost.Load(), repliesLost: r.repliesLost.Load(),
		executions: r.executions.Load(), cancelled: r.cancelled.Load(),
		abandoned: r.abandoned.Load(), failedExec: r.failedExec.Load(),
		handler:     time.Duration(r.handlerNS.Load()),
		wastedTotal: time.Duration(r.wastedNS.Load()),
		lagTotal:    time.Duration(r.lagNS.Load()),
		lagMax:      time.Duration(r.lagMaxNS.Load()),
	}
	for i := range r.wasted {
		x.wasted[i] = r.wasted[i].Load()
	}
	r.gmu.Lock()
	rec.InFlight = r.inflight.Peaks()
	rec.Concurrency = r.conc.Peaks()
	rec.Queue = r.queue.Peaks()
	x.busy = r.busy.Peaks()
	r.gmu.Unlock()
	r.lmu.Lock()
	rec.Latencies = slices.Clone(r.latencies)
	r.lmu.Unlock()
	slices.Sort(rec.Latencies)
	return x
}

// setReports records the fates of the reports of a fleet's report queues.
func (r *recorder) setReports(offered, delivered, delayed, dropped, pending int64) {
	for i, v := range []int64{offered, delivered, delayed, dropped, pending} {
		r.reports[i].Store(v)
	}
}
