package sim

import (
	"fmt"
	"time"
)

// ReportQueue makes each client keep its records (telemetry reports) in
// a bounded buffer and deliver them in batches, following the rules of
// the queue package's Queue with one worker, DropOldest and no linger:
// every arrival offers one report; a full buffer evicts its oldest
// report; a delivery is one call carrying up to MaxBatch of the oldest
// reports, made whenever the client is neither delivering nor paused;
// a delivery that succeeds delivers its batch; one that gives up (its
// attempts, time or budget exhausted, its breaker open) puts the batch
// back at the oldest end of the buffer (evicting its own oldest reports
// when there is no room) and pauses the client for the policy's next
// backoff delay, growing with each consecutive give-up and reset by the
// first success (a policy without backoff delivers again at once, as
// the live lab's queue.Queue does under a policy that never waits).
// The simulator follows these rules in virtual time; the live lab's
// agents run the real queue.Queue.
type ReportQueue struct {
	// Capacity is the buffer's size in reports. At least 1.
	Capacity int
	// MaxBatch bounds the reports of one delivery. 0: Capacity.
	MaxBatch int
}

func (q *ReportQueue) validate() error {
	if q.Capacity < 1 || q.Capacity > 1<<20 || q.MaxBatch < 0 || q.MaxBatch > q.Capacity {
		return fmt.Errorf("report queue: capacity must be in [1, %d] and max batch in [0, capacity], got %d and %d", 1<<20, q.Capacity, q.MaxBatch)
	}
	return nil
}

func (q *ReportQueue) maxBatch() int {
	if q.MaxBatch == 0 {
		return q.Capacity
	}
	return q.MaxBatch
}

// report is one buffered record: when it was made, and whether a delivery
// that gave up has put it back already.
type report struct {
	at      time.Duration
	putBack bool
}

// agent is one client's report queue.
type agent struct {
	buf        []report // oldest first
	batch      []report // the delivery in flight
	busy       bool     // a delivery is in flight
	pausedTill time.Duration
	giveUps    int           // consecutive give-ups
	prev       time.Duration // the previous pause
	resumeGen  int64
}

// offer buffers a new report for client c and delivers when it can.
func (r *runner) offer(c int32) {
	ag := &r.agents[c]
	r.rec.rec.ReportsOffered++
	if len(ag.buf) == r.m.Reports.Capacity {
		ag.buf = ag.buf[1:]
		r.rec.rec.ReportsDropped++
	}
	ag.buf = append(ag.buf, report{at: r.s.now})
	r.deliver(c)
}

// deliver starts client c's next delivery when it is idle and not paused.
func (r *runner) deliver(c int32) {
	ag := &r.agents[c]
	if ag.busy || len(ag.buf) == 0 || r.s.now < ag.pausedTill {
		return
	}
	k := min(len(ag.buf), r.m.Reports.maxBatch())
	ag.batch = append(ag.batch[:0], ag.buf[:k]...)
	ag.buf = append(ag.buf[:0], ag.buf[k:]...)
	ag.busy = true
	r.startCall(c, -1, 0)
}

// delivered ends client c's delivery: ok delivers its batch; a failure
// puts the batch back and pauses.
func (r *runner) delivered(c int32, ok bool) {
	ag := &r.agents[c]
	ag.busy = false
	if ok {
		for _, rp := range ag.batch {
			r.rec.rec.ReportsDelivered++
			if rp.putBack {
				r.rec.rec.ReportsDelayed++
			}
		}
		ag.batch = ag.batch[:0]
		ag.giveUps, ag.prev = 0, 0
		r.deliver(c)
		return
	}
	// Put the batch back at the oldest end; what does not fit is dropped,
	// the batch's own oldest reports first.
	room := r.m.Reports.Capacity - len(ag.buf)
	keep := min(room, len(ag.batch))
	r.rec.rec.ReportsDropped += int64(len(ag.batch) - keep)
	back := ag.batch[len(ag.batch)-keep:]
	for i := range back {
		back[i].putBack = true
	}
	ag.buf = append(append(make([]report, 0, r.m.Reports.Capacity), back...), ag.buf...)
	ag.batch = ag.batch[:0]
	ag.giveUps++
	var d time.Duration // no backoff: deliver again at once, as a Queue whose Policy never waits
	if h := &r.hops[0]; h.strat != nil {
		d = h.strat.Delay(ag.giveUps, ag.prev)
	}
	ag.prev = d
	ag.pausedTill = r.s.now + d
	ag.resumeGen++
	r.s.After(d, r.hResume, c, ag.resumeGen)
}

func (r *runner) onResume(e Event) {
	if ag := &r.agents[e.Ref]; ag.resumeGen == e.Arg {
		r.deliver(e.Ref)
	}
}

// recordPending counts the reports still buffered or in flight at the end.
func (r *runner) recordPending() {
	for i := range r.agents {
		r.rec.rec.ReportsPending += int64(len(r.agents[i].buf) + len(r.agents[i].batch))
	}
}
