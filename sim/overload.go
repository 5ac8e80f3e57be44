package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stormguard/stormguard/admission"
)

// This file is the lab's model of server-side overload control (issue
// 38): naive clients in front of one database, and only the database
// protecting itself, with no control, a static concurrency limit
// (layer.Limit's rule), or the real admission.Limiter (its Limit
// algorithm, its windows and probes, on the run's virtual clock) behind
// the CoDel and adaptive-LIFO queue rule of package admission, modelled
// here (codelQueue): admission's queue blocks goroutines, which a
// single-threaded virtual time cannot host, so the run applies its rule
// and TestCoDelQueueModelMatchesAdmission checks the two on the same
// events.

// ServerControlKind is how an OverloadModel's database protects itself.
type ServerControlKind uint8

// Server-side controls.
const (
	// ControlNone: every request waits in one FIFO queue in front of the
	// workers, bounded by ServerControl.Queue (0: unbounded; a full queue
	// answers 503 at once).
	ControlNone ServerControlKind = iota
	// ControlStatic: at most ServerControl.Limit requests inside the
	// database (in service or waiting for a worker); the others are
	// answered 503 at once, as layer.Limit does.
	ControlStatic
	// ControlAdmission: the real admission.Limiter with the
	// ServerControl.NewLimit algorithm bounds the requests inside the
	// database; beyond its limit a request waits in a queue of
	// ServerControl.Queue under CoDel and adaptive LIFO (codelQueue), or
	// is shed.
	ControlAdmission
)

// ServerControl is one contender of a server-side comparison.
type ServerControl struct {
	// Name names the contender in the rows, the legend and errors.
	Name string
	// Kind is how the database protects itself: ControlNone (the zero
	// value), ControlStatic or ControlAdmission.
	Kind ServerControlKind
	// Limit is ControlStatic's bound.
	Limit int
	// Queue bounds ControlNone's FIFO (0: unbounded) and
	// ControlAdmission's queue (0: admission.DefaultQueueLength).
	Queue int
	// NewLimit builds ControlAdmission's algorithm for a run. nil: a
	// Gradient2 with its defaults.
	NewLimit func() admission.Limit
	// Doc defines the contender in one line, for the legend.
	Doc string
}

// OverloadTrigger is what pushes the database into overload during
// [Start, End).
type OverloadTrigger struct {
	// Start and End bound the trigger's window of virtual time; the run's
	// Metrics take it as the fault (baseline before Start, recovery from
	// End).
	Start, End time.Duration
	// Extra is added to each network leg that sets out in the window, the
	// request to the database and the reply back alike (the paper's
	// trigger is queries slower to reach it). 0: none.
	Extra time.Duration
	// Surge is the calls per second that extra clients add in the
	// window, on top of the steady rate (0: none).
	Surge float64
}

// OverloadModel is naive clients calling one database that protects
// itself, or not: Clients processes each start calls as a Poisson
// process of Rate per second for Duration; an attempt times out after
// Timeout and the call retries at once, on any failure, until it has
// made Attempts attempts. The database has Workers workers with service
// time Service, and does not learn that a caller gave up: a request
// whose caller timed out is still served when its turn comes (except in
// the admission queue, which drops a request whose deadline, the
// attempt's timeout, has passed, as admission does with the inbound
// deadline).
type OverloadModel struct {
	// Clients is the number of client processes, in [1, 10000].
	Clients int
	// Rate is each client's calls per second, in (0, 1e5].
	Rate float64
	// Duration is how long the clients start calls, in (0, 1h].
	Duration time.Duration
	// Drain is how long the run goes on after Duration, in [0, 1h]; a
	// call still open then counts as failed.
	Drain time.Duration
	// Warmup is the start of the Metrics' baseline window, which ends at
	// Trigger.Start. 0: the run's start.
	Warmup time.Duration
	// Attempts is each call's number of attempts, the first included, in
	// [1, 100].
	Attempts int
	// Timeout is how long a client waits for one attempt; must be
	// positive.
	Timeout time.Duration
	// Workers is the number of requests the database serves at once;
	// must be positive.
	Workers int
	// Service is the time one request holds a worker; its mean must be
	// positive.
	Service Dist
	// Latency is the one-way network latency, drawn for each request and
	// each reply.
	Latency Dist
	// Trigger is what pushes the database into overload.
	Trigger OverloadTrigger
	// Window is the stretch [Window[0], Window[1]) the overload figures
	// (OverloadStats) are measured over.
	Window [2]time.Duration
}

// Capacity is the database's nominal capacity in requests per second.
func (m *OverloadModel) Capacity() float64 {
	return float64(m.Workers) / m.Service.Mean().Seconds()
}

func (m *OverloadModel) horizon() time.Duration { return satAdd(m.Duration, m.Drain) }

// validate refuses a model or control that cannot run, or that would
// mean no protection by mistake (a static limit below 1).
func (m *OverloadModel) validate(ctl *ServerControl) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: overload model: "+format, append([]any{ErrModel}, args...)...)
	}
	switch {
	case m.Clients <= 0 || m.Clients > 10_000 || !(m.Rate > 0) || m.Rate > 1e5:
		return bad("clients must be in [1, 10000] and the rate in (0, 1e5] per client, got %d and %g", m.Clients, m.Rate)
	case m.Duration <= 0 || m.Duration > time.Hour || m.Drain < 0 || m.Drain > time.Hour:
		return bad("duration must be in (0, 1h] and the drain in [0, 1h], got %s and %s", m.Duration, m.Drain)
	case m.Workers <= 0 || m.Attempts <= 0 || m.Attempts > 100 || m.Timeout <= 0:
		return bad("workers, attempts (at most 100) and the timeout must be positive, got %d, %d and %s", m.Workers, m.Attempts, m.Timeout)
	case m.Service.Mean() <= 0:
		return bad("service time must have a positive mean, got %s", m.Service)
	case m.Window[1] <= m.Window[0] || m.Window[0] < 0:
		return bad("window [%s, %s) is empty", m.Window[0], m.Window[1])
	case !(m.Trigger.Surge >= 0) || m.Trigger.Surge > 1e6 || m.Trigger.Extra < 0 || m.Trigger.Extra > time.Hour:
		return bad("a surge must be in [0, 1e6] calls/s and an extra latency in [0, 1h], got %g and %s", m.Trigger.Surge, m.Trigger.Extra)
	}
	switch ctl.Kind {
	case ControlNone:
		if ctl.Queue < 0 {
			return bad("control %s: queue %d must not be negative (0: unbounded)", ctl.Name, ctl.Queue)
		}
	case ControlStatic:
		if ctl.Limit < 1 {
			return bad("control %s: a static limit of %d would admit nothing; want at least 1", ctl.Name, ctl.Limit)
		}
	case ControlAdmission:
	default:
		return bad("control %s: unknown kind %d", ctl.Name, ctl.Kind)
	}
	return nil
}

// OverloadStats are the figures of one run of an OverloadModel beyond
// Metrics, over the model's Window.
type OverloadStats struct {
	// Goodput is the calls per second that succeeded in the window (by
	// end time), and GoodputShare that over the database's capacity.
	Goodput      float64 `json:"goodput_per_s"`
	GoodputShare float64 `json:"goodput_share"`
	// Offered is the attempts per second sent to the database in the
	// window, first tries and retries.
	Offered float64 `json:"offered_per_s"`
	// Served is the requests per second whose service started in the
	// window; InTime the share of them whose caller was still waiting
	// when the service ended.
	Served float64 `json:"served_per_s"`
	InTime float64 `json:"in_time"`
	// WaitP50ms and WaitP99ms are percentiles of the wait, from arrival
	// at the database to the start of service, of the requests whose
	// service started in the window.
	WaitP50ms float64 `json:"wait_p50_ms"`
	WaitP99ms float64 `json:"wait_p99_ms"`
	// Shed is the share of the attempts arriving in the window that the
	// database refused (503) or dropped without serving.
	Shed float64 `json:"shed"`
	// LimitMean is the mean limit in force over the window
	// (ControlAdmission only).
	LimitMean float64 `json:"limit_mean,omitempty"`
}

func meanOverloadStats(xs []OverloadStats) OverloadStats {
	var o OverloadStats
	n := float64(len(xs))
	for _, x := range xs {
		o.Goodput += x.Goodput / n
		o.GoodputShare += x.GoodputShare / n
		o.Offered += x.Offered / n
		o.Served += x.Served / n
		o.InTime += x.InTime / n
		o.WaitP50ms += x.WaitP50ms / n
		o.WaitP99ms += x.WaitP99ms / n
		o.Shed += x.Shed / n
		o.LimitMean += x.LimitMean / n
	}
	return o
}

// OverloadResult is one run of an OverloadModel.
type OverloadResult struct {
	// Metrics are the run's figures as Metrics defines them, with the
	// Trigger's window as the fault and the database as the measured
	// tier.
	Metrics Metrics
	// Stats are the overload figures, over the model's Window.
	Stats OverloadStats
	// Series is the database's load over the whole run, at ChartStep
	// resolution.
	Series Series
	// Events is the number of events the run processed.
	Events uint64
}

// ovReq is one attempt, at the client and at the database.
type ovReq struct {
	call     *ovCall
	n        int           // attempt number, from 1
	arrive   time.Duration // at the database
	deadline time.Duration // when its caller gives up
	permit   admission.Permit
	counted  bool // inside the database's count (static) or holding a permit
	finished bool // the caller has heard its end (reply, 503 or timeout)
}

type ovCall struct {
	start time.Duration
	cur   *ovReq
	done  bool
}

// overloadRun is one run's state.
type overloadRun struct {
	m   *OverloadModel
	ctl *ServerControl
	s   *Sim
	clk *Clock
	rec *Recording
	lim *admission.Limiter
	q   *codelQueue[*ovReq]

	calls  []*ovCall
	busy   int
	fifo   []*ovReq // waiting for a worker
	inside int      // static: requests inside the database
	conc   Gauge
	queue  Gauge
	flight Gauge
	nfl    int32

	// window figures
	waits                []time.Duration
	served, inTime       int
	arrived, shed        int
	limitSum, limitCount float64
}

// RunOverload runs m once with the server control ctl and seed.
func RunOverload(ctx context.Context, m *OverloadModel, ctl ServerControl, seed uint64) (OverloadResult, error) {
	if err := m.validate(&ctl); err != nil {
		return OverloadResult{}, err
	}
	s := New(seed)
	r := &overloadRun{m: m, ctl: &ctl, s: s, clk: s.Clock()}
	n := int(m.horizon()/DefaultBucket) + 1
	r.rec = NewRecording(DefaultBucket, n)
	r.rec.QueueSlack = int32(float64(m.Workers) * RecoveryQueueShare)
	r.conc, r.queue, r.flight = NewGauge(n), NewGauge(n), NewGauge(n)
	if ctl.Kind == ControlAdmission {
		var alg admission.Limit
		if ctl.NewLimit != nil {
			alg = ctl.NewLimit()
		}
		// A Limiter's Seed 0 draws a random seed: seed 0 would give a
		// run no one can repeat.
		lim, err := admission.New(admission.Config{Limit: alg, Clock: r.clk, Seed: cmp.Or(seed, 1), QueueLength: ctl.Queue})
		if err != nil {
			return OverloadResult{}, err
		}
		r.lim = lim
		ql := ctl.Queue
		if ql == 0 {
			ql = admission.DefaultQueueLength
		}
		r.q = newCoDelQueue[*ovReq](ql, admission.DefaultQueueTarget, admission.DefaultQueueInterval)
	}
	// Arrivals: the steady clients, then the surge's.
	arr := Arrival{Kind: Poisson, Rate: m.Rate}
	for c := 0; c < m.Clients; c++ {
		st := arr.Stream(seed, c)
		r.startStream(&st, 0, m.Duration)
	}
	if t := m.Trigger; t.Surge > 0 {
		sarr := Arrival{Kind: Poisson, Rate: t.Surge / float64(m.Clients)}
		for c := 0; c < m.Clients; c++ {
			st := sarr.Stream(seed, m.Clients+c)
			r.startStream(&st, t.Start, min(t.End, m.Duration))
		}
	}
	if m.Window[1] > m.Window[0] && r.lim != nil {
		r.sampleLimit()
	}
	if err := s.RunUntilContext(ctx, m.horizon(), DefaultMaxEvents); err != nil {
		return OverloadResult{}, err
	}
	for _, c := range r.calls {
		if !c.done {
			r.rec.Open = append(r.rec.Open, s.Now()-c.start)
		}
	}
	s.release()
	return r.result(), nil
}

func (r *overloadRun) startStream(st *ArrivalStream, from, to time.Duration) {
	at := from + st.First()
	var next func()
	next = func() {
		r.startCall()
		at += st.Next()
		if at < to {
			r.clk.AfterFunc(at-r.s.Now(), next)
		}
	}
	if at < to {
		r.clk.AfterFunc(at, next)
	}
}

func (r *overloadRun) inWindow(t time.Duration) bool {
	return t >= r.m.Window[0] && t < r.m.Window[1]
}

func (r *overloadRun) sampleLimit() {
	var tick func()
	tick = func() {
		if r.inWindow(r.s.Now()) {
			r.limitSum += float64(r.lim.Limit())
			r.limitCount++
		}
		if r.s.Now() < r.m.Window[1] {
			r.clk.AfterFunc(10*time.Millisecond, tick)
		}
	}
	r.clk.AfterFunc(0, tick)
}

func (r *overloadRun) bucket() int { return r.rec.Index(r.s.Now()) }

func (r *overloadRun) leg() time.Duration {
	d := r.m.Latency.Sample(r.s.Rand())
	if t := r.m.Trigger; t.Extra > 0 && r.s.Now() >= t.Start && r.s.Now() < t.End {
		d += t.Extra
	}
	return d
}

func (r *overloadRun) startCall() {
	r.rec.Calls++
	c := &ovCall{start: r.s.Now()}
	r.calls = append(r.calls, c)
	r.send(c, 1)
}

func (r *overloadRun) send(c *ovCall, n int) {
	now := r.s.Now()
	b := r.bucket()
	r.rec.Attempts[b]++
	if n > 1 {
		r.rec.Retries[b]++
	}
	q := &ovReq{call: c, n: n, deadline: now + r.m.Timeout}
	c.cur = q
	r.nfl++
	r.flight.Set(b, r.nfl)
	r.clk.AfterFunc(r.leg(), func() { r.arrive(q) })
	r.clk.AfterFunc(r.m.Timeout, func() { r.end(q, false) })
}

// end is the caller hearing q's outcome: ok, or a failure (503, timeout).
func (r *overloadRun) end(q *ovReq, ok bool) {
	if q.finished {
		return
	}
	q.finished = true
	r.nfl--
	b := r.bucket()
	r.flight.Set(b, r.nfl)
	c := q.call
	if ok {
		r.rec.AttemptsOK[b]++
	} else {
		r.rec.AttemptsFailed[b]++
	}
	if ok || q.n >= r.m.Attempts {
		c.done = true
		if ok {
			r.rec.CallsOK[b]++
		} else {
			r.rec.CallsFailed[b]++
		}
		r.rec.Latencies = append(r.rec.Latencies, r.s.Now()-c.start)
		return
	}
	r.send(c, q.n+1)
}

// reply sends q's answer back to its caller.
func (r *overloadRun) reply(q *ovReq, ok bool) {
	r.clk.AfterFunc(r.leg(), func() { r.end(q, ok) })
}

func (r *overloadRun) gauges() {
	b := r.bucket()
	waiting := len(r.fifo)
	if r.q != nil {
		waiting += r.q.Len()
	}
	r.queue.Set(b, int32(waiting))
	r.conc.Set(b, int32(waiting+r.busy))
}

func (r *overloadRun) refuse(q *ovReq) {
	if r.inWindow(q.arrive) {
		r.shed++
	}
	r.reply(q, false)
}

func (r *overloadRun) arrive(q *ovReq) {
	now := r.s.Now()
	q.arrive = now
	if r.inWindow(now) {
		r.arrived++
	}
	defer r.gauges()
	switch r.ctl.Kind {
	case ControlNone:
		if r.busy < r.m.Workers {
			r.startService(q)
		} else if r.ctl.Queue > 0 && len(r.fifo) >= r.ctl.Queue {
			r.refuse(q)
		} else {
			r.fifo = append(r.fifo, q)
		}
	case ControlStatic:
		if r.inside >= r.ctl.Limit {
			r.refuse(q)
			return
		}
		r.inside++
		q.counted = true
		r.work(q)
	case ControlAdmission:
		if r.q.Len() == 0 {
			if p, err := r.lim.TryAcquire(); err == nil {
				q.permit, q.counted = p, true
				r.work(q)
				return
			}
		}
		node, res := r.q.Push(now, q, now >= q.deadline)
		switch res {
		case queueFull, queueCallerGone:
			r.refuse(q)
		case queueQueued:
			r.clk.AfterFunc(node.timeout, func() {
				if r.q.Expire(r.s.Now(), node) {
					r.refuse(q)
					r.gauges()
				}
			})
			r.dispatch()
		}
	}
}

// dispatch gives free admission slots to queued requests, as admission's
// queue does after every release.
func (r *overloadRun) dispatch() {
	now := r.s.Now()
	for {
		node, gone, ok := r.q.Next(now, func(q *ovReq) bool { return now >= q.deadline })
		if !ok {
			return
		}
		q := node.v
		if gone {
			r.refuse(q)
			continue
		}
		p, err := r.lim.TryAcquire()
		if err != nil {
			return
		}
		r.q.Take(now, node)
		q.permit, q.counted = p, true
		r.work(q)
	}
}

// work hands an admitted request to the workers.
func (r *overloadRun) work(q *ovReq) {
	if r.busy < r.m.Workers {
		r.startService(q)
		return
	}
	r.fifo = append(r.fifo, q)
}

func (r *overloadRun) startService(q *ovReq) {
	now := r.s.Now()
	r.busy++
	if r.inWindow(now) {
		r.waits = append(r.waits, now-q.arrive)
		r.served++
	}
	d := r.m.Service.Sample(r.s.Rand())
	r.clk.AfterFunc(d, func() { r.finish(q, now) })
}

func (r *overloadRun) finish(q *ovReq, started time.Duration) {
	r.busy--
	if r.inWindow(started) && !q.finished {
		r.inTime++
	}
	r.reply(q, true)
	if len(r.fifo) > 0 {
		next := r.fifo[0]
		r.fifo[0] = nil
		r.fifo = r.fifo[1:]
		r.startService(next)
	}
	if q.counted {
		q.counted = false
		switch r.ctl.Kind {
		case ControlStatic:
			r.inside--
		case ControlAdmission:
			q.permit.Release()
			r.dispatch()
		}
	}
	r.gauges()
}

func (r *overloadRun) result() OverloadResult {
	r.rec.Concurrency, r.rec.Queue, r.rec.InFlight = r.conc.Peaks(), r.queue.Peaks(), r.flight.Peaks()
	// A call still open at the horizon counts as failed, with its age
	// (Recording.Open).
	slices.Sort(r.rec.Latencies)
	slices.Sort(r.rec.Open)
	m := r.m
	faults := []Fault{{Kind: FaultLatency, Start: m.Trigger.Start, End: m.Trigger.End}}
	res := OverloadResult{Metrics: r.rec.Metrics(m.Warmup, m.Duration, faults), Events: r.s.Events()}
	res.Series = r.rec.Series(r.rec.Len())
	w := (m.Window[1] - m.Window[0]).Seconds()
	from, to := r.rec.Index(m.Window[0]), r.rec.Index(m.Window[1])
	var ok, att int64
	for i := from; i < to && i < r.rec.Len(); i++ {
		ok += int64(r.rec.CallsOK[i])
		att += int64(r.rec.Attempts[i])
	}
	st := &res.Stats
	st.Goodput = float64(ok) / w
	st.GoodputShare = st.Goodput / m.Capacity()
	st.Offered = float64(att) / w
	st.Served = float64(r.served) / w
	st.InTime = ratio(float64(r.inTime), float64(r.served))
	slices.Sort(r.waits)
	st.WaitP50ms = ms(Percentile(r.waits, 0.5))
	st.WaitP99ms = ms(Percentile(r.waits, 0.99))
	st.Shed = ratio(float64(r.shed), float64(r.arrived))
	if r.limitCount > 0 {
		st.LimitMean = r.limitSum / r.limitCount
	}
	return res
}
