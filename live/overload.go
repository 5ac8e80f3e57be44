package live

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/sim"
)

// This file is issue #38's server-side comparison on loopback (item 7):
// naive clients in front of one real server (a faultinject worker pool
// with a real service time) protected by the real layer.Adaptive
// middleware (an admission.Limiter: adaptive limit, CoDel and adaptive
// LIFO), by layer.Limit (a static limit), or not at all; each case runs
// beside sim.RunOverload at the same parameters.

// The names of RunOverload's runs on the command line ("stormsim live
// metastable-server", "stormsim live fail-at-scale") and in their JSON:
// sim's scenarios of those names on a real server.
const (
	MetastableServerScenario = "metastable-server"
	FailAtScaleScenario      = "fail-at-scale"
)

// DefaultOverloadWorkers is the live database's workers: 8 of [60ms,
// 100ms] serve 100 requests/s, a third of sim's 300/s (24 workers), what
// loopback on two loaded cores carries for every contender at once.
const DefaultOverloadWorkers = 8

// unboundedQueue stands for "no bound" where faultinject wants one.
const unboundedQueue = 1 << 24

// OverloadCase is one case of a server-side run: an OverloadModel (its
// Window the stretch the figures cover) and a name.
type OverloadCase struct {
	// Name labels the case in reports; OverloadReport.Row finds the case
	// by it.
	Name string
	// Model is the database, clients and trigger the case runs, live and
	// in virtual time (sim.RunOverload); its Window is the stretch of the
	// run the OverloadRow.Stats figures cover.
	Model sim.OverloadModel
	// WindowDoc says in words what the window is.
	WindowDoc string
}

// share scales a figure of sim's 24-worker database to workers.
func share(v float64, workers int) float64 { return v * float64(workers) / 24 }

// liveDatabase is sim's metastable database with workers workers (sim's
// has 24) and the clients' rate in the same proportion (280/s for 300/s),
// its timeline scaled by scale (the service, the timeout and the extra
// latency are not), legs of loopback's |Normal(100µs, 20µs)|.
func liveDatabase(workers int, scale float64) sim.OverloadModel {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	return sim.OverloadModel{
		Clients: 10, Rate: share(28, workers),
		Duration: sc(90 * time.Second), Drain: max(sc(10*time.Second), 3*time.Second), Warmup: sc(5 * time.Second),
		Attempts: 2, Timeout: time.Second,
		Workers: workers, Service: sim.Uniform(60*time.Millisecond, 100*time.Millisecond),
		Latency: sim.Normal(100*time.Microsecond, 20*time.Microsecond),
	}
}

// MetastableServerCases returns sim's metastable-server cases for a
// database of workers workers, the timeline scaled by scale (1: sim's
// 90s): the paper's trigger (every leg to and from the database 1s slower
// from 20s to 30s) measured over the 20s after it, and a surge (as many
// calls again from 20s to 30s) measured over the surge after its first
// tenth (from 21s).
func MetastableServerCases(workers int, scale float64) []OverloadCase {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	paper := liveDatabase(workers, scale)
	paper.Trigger = sim.OverloadTrigger{Start: sc(20 * time.Second), End: sc(30 * time.Second), Extra: time.Second}
	paper.Window = [2]time.Duration{sc(30 * time.Second), sc(50 * time.Second)}
	surge := liveDatabase(workers, scale)
	surge.Trigger = sim.OverloadTrigger{Start: sc(20 * time.Second), End: sc(30 * time.Second), Surge: share(280, workers)}
	surge.Window = [2]time.Duration{sc(21 * time.Second), sc(30 * time.Second)}
	return []OverloadCase{
		{Name: fmt.Sprintf("paper: queries 1s slower for %s", roundDur(paper.Trigger.End-paper.Trigger.Start)), Model: paper, WindowDoc: "the time after the trigger"},
		{Name: fmt.Sprintf("surge: 2x the calls for %s", roundDur(surge.Trigger.End-surge.Trigger.Start)), Model: surge, WindowDoc: "the surge after its first tenth"},
	}
}

// FailAtScaleCase returns sim's fail-at-scale case for a database of
// workers workers, the timeline scaled by scale (1: sim's 70s): twice the
// capacity from 20s to 50s, one attempt per call under a 1s deadline,
// measured from 25s to 50s.
func FailAtScaleCase(workers int, scale float64) OverloadCase {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	m := liveDatabase(workers, scale)
	m.Attempts = 1
	m.Duration = sc(70 * time.Second)
	m.Trigger = sim.OverloadTrigger{Start: sc(20 * time.Second), End: sc(50 * time.Second), Surge: share(320, workers)}
	m.Window = [2]time.Duration{sc(25 * time.Second), sc(50 * time.Second)}
	return OverloadCase{Name: fmt.Sprintf("2x overload: %.0f calls/s for %s", share(600, workers), roundDur(m.Trigger.End-m.Trigger.Start)), Model: m, WindowDoc: "the overload after its first sixth"}
}

// MetastableServerControls returns sim's metastable-server contenders for
// a database of workers workers: no control, a static limit of about
// twice the workers (sim's 50 for 24) and one ten times that (sim's 500),
// and the real admission.Limiter (Gradient2 at its defaults) behind a
// CoDel and adaptive-LIFO queue of 100 × workers/24 (sim's 100).
func MetastableServerControls(workers int) []sim.ServerControl {
	lo, hi := int(math.Round(share(50, workers))), int(math.Round(share(500, workers)))
	return []sim.ServerControl{
		{Name: "none", Kind: sim.ControlNone, Doc: "no control: one unbounded FIFO queue in front of the workers"},
		{Name: fmt.Sprintf("static-%d", lo), Kind: sim.ControlStatic, Limit: lo, Doc: fmt.Sprintf("layer.Limit(%d): at most %d requests inside (about twice the workers, a good guess), the rest answered 503 at once", lo, lo)},
		{Name: fmt.Sprintf("static-%d", hi), Kind: sim.ControlStatic, Limit: hi, Doc: fmt.Sprintf("layer.Limit(%d): the same rule with a guess too high (their wait for a worker passes the 1s timeout)", hi)},
		{Name: "adaptive", Kind: sim.ControlAdmission, Queue: max(1, int(math.Round(share(100, workers)))),
			Doc: "layer.Adaptive with the real admission.Limiter: Gradient2 at its defaults, a queue under CoDel (5ms target, 100ms interval) and adaptive LIFO, queued requests whose caller left dropped"},
	}
}

// FailAtScaleControls returns sim's fail-at-scale contenders for a
// database of workers workers, each with a queue of 1000 × workers/24
// (sim's 1,000: a wait of 3.3s once full): a plain FIFO, the same queue
// under CoDel and adaptive LIFO in front of the workers
// (admission.Fixed{N: workers}), and Gradient2 behind the same queue.
func FailAtScaleControls(workers int) []sim.ServerControl {
	q := max(1, int(math.Round(share(1000, workers))))
	return []sim.ServerControl{
		{Name: "fifo", Kind: sim.ControlNone, Queue: q, Doc: fmt.Sprintf("a plain FIFO queue of %d in front of the workers, a full queue answering 503", q)},
		{Name: "codel+lifo", Kind: sim.ControlAdmission, Queue: q, NewLimit: func() admission.Limit { return admission.Fixed{N: workers} },
			Doc: fmt.Sprintf("layer.Adaptive: the same queue of %d under CoDel (5ms target, 100ms interval) and adaptive LIFO, in front of the workers (admission.Fixed{N: %d})", q, workers)},
		{Name: "adaptive+codel+lifo", Kind: sim.ControlAdmission, Queue: q,
			Doc: "layer.Adaptive with Gradient2 (its defaults) behind the same CoDel and LIFO queue"},
	}
}

// OverloadOptions configure RunOverload. Zero fields take the defaults.
type OverloadOptions struct {
	// Scenario is MetastableServerScenario (the default) or
	// FailAtScaleScenario: it picks the default Cases and Controls, the
	// title and the verdict.
	Scenario string
	// Workers sizes the database (default DefaultOverloadWorkers: 100
	// requests/s) and, in proportion, the clients' rate, the queues and
	// the static limits of the default cases and controls. In [1, 240].
	Workers int
	// Scale stretches the default cases' timeline (default 1: sim's; the
	// service time, the 1s timeout and the trigger's extra latency stay).
	// In (0, 10].
	Scale float64
	// Cases and Controls are run (default: the Scenario's). Every control
	// runs in every case; the controls of one case run at the same time,
	// the cases one after another.
	Cases    []OverloadCase
	Controls []sim.ServerControl
	// Seed draws the arrivals and the service times, live and virtual.
	Seed uint64
	// Sequential runs the controls of a case one after another too.
	Sequential bool
}

func (o *OverloadOptions) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrScenario, o.Scenario}, args...)...)
	}
	if o.Scenario == "" {
		o.Scenario = MetastableServerScenario
	}
	if o.Workers == 0 {
		o.Workers = DefaultOverloadWorkers
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	switch {
	case o.Scenario != MetastableServerScenario && o.Scenario != FailAtScaleScenario:
		return bad("unknown scenario (want %s or %s)", MetastableServerScenario, FailAtScaleScenario)
	case o.Workers < 1 || o.Workers > 240:
		return bad("workers must be in [1, 240], got %d", o.Workers)
	case !(o.Scale > 0) || o.Scale > 10:
		return bad("scale must be in (0, 10], got %g", o.Scale)
	}
	if o.Cases == nil {
		if o.Scenario == FailAtScaleScenario {
			o.Cases = []OverloadCase{FailAtScaleCase(o.Workers, o.Scale)}
		} else {
			o.Cases = MetastableServerCases(o.Workers, o.Scale)
		}
	}
	if o.Controls == nil {
		if o.Scenario == FailAtScaleScenario {
			o.Controls = FailAtScaleControls(o.Workers)
		} else {
			o.Controls = MetastableServerControls(o.Workers)
		}
	}
	if len(o.Cases) == 0 || len(o.Controls) == 0 {
		return bad("no case or no control to run")
	}
	for _, c := range o.Cases {
		m := c.Model
		switch {
		case m.Duration > MaxDuration || m.Drain > MaxDuration:
			return bad("case %s: duration and drain must be at most %s", c.Name, MaxDuration)
		case m.Clients > DefaultMaxClients:
			return bad("case %s: at most %d clients, got %d", c.Name, DefaultMaxClients, m.Clients)
		case m.Attempts > MaxCascadeAttempts:
			return bad("case %s: at most %d attempts, got %d", c.Name, MaxCascadeAttempts, m.Attempts)
		case (m.Rate*float64(m.Clients)+m.Trigger.Surge)*float64(m.Attempts) > MaxCallRate:
			return bad("case %s: more than %d attempts/s", c.Name, MaxCallRate)
		case (m.Rate*float64(m.Clients)+m.Trigger.Surge)*m.Duration.Seconds() > MaxCalls:
			return bad("case %s: more than %d calls", c.Name, MaxCalls)
		case m.Window[1] > m.Duration+m.Drain:
			return bad("case %s: the window ends after the run", c.Name)
		}
	}
	return nil
}

// OverloadReport is what RunOverload measured: per case, one row per
// control.
type OverloadReport struct {
	// Options are the options as run, defaults filled in.
	Options OverloadOptions
	// Cases are in the order of Options.Cases.
	Cases []OverloadCaseReport
	// ElapsedS is the run's wall time in seconds.
	ElapsedS float64
}

// OverloadCaseReport is one case's rows, in the order of
// Options.Controls.
type OverloadCaseReport struct {
	// Case is the case as run (from OverloadOptions.Cases).
	Case OverloadCase
	// Rows are the case's results, one per control, in the order of
	// OverloadOptions.Controls.
	Rows []OverloadRow
}

// OverloadRow is one control in one case, live and virtual: the same
// figures as sim's (sim.OverloadStats over the case's window, and
// sim.Metrics over the run from the run's 10ms buckets).
type OverloadRow struct {
	// Control is the server-side control the row ran (from
	// OverloadOptions.Controls); OverloadReport.Row finds the row by its
	// Name.
	Control sim.ServerControl
	// Stats and Metrics are measured on the wire: goodput and offered
	// load by the clients, waits, service in time and shedding by the
	// server.
	Stats   sim.OverloadStats
	Metrics sim.Metrics
	// Virtual is sim.RunOverload at the same parameters and seed.
	Virtual sim.OverloadResult
	// StartLagMax is how late the clients started a call against their
	// schedule at worst: a check on the harness.
	StartLagMax time.Duration
}

// Row returns the row of the control called name in the case called
// kase.
func (r *OverloadReport) Row(kase, name string) (OverloadRow, bool) {
	for _, c := range r.Cases {
		if c.Case.Name != kase {
			continue
		}
		for _, row := range c.Rows {
			if row.Control.Name == name {
				return row, true
			}
		}
	}
	return OverloadRow{}, false
}

// RunOverload runs issue #38's server-side comparison live: for each case
// and control a real HTTP server on 127.0.0.1 — a faultinject worker pool
// (Workers requests at once, a real service time each, the rest waiting
// in a FIFO queue) behind layer.Adaptive (ControlAdmission),
// layer.Limit (ControlStatic) or nothing (ControlNone, the pool's queue
// bounded by Control.Queue) — that serves a request whose caller has left
// (the database does not learn, as in sim's model; the admission queue
// still drops such a request before it is admitted), and naive clients
// (plain http.Client, not httpretry, which would honour the overload
// marker) that retry at once after any failure, a 503 or their attempt's
// timeout, up to the model's attempts. The trigger's extra latency delays
// each request on its way in and its answer on its way out, outside the
// database. Each case also runs in virtual time (sim.RunOverload) at the
// same parameters. RunOverload returns when every call has ended and
// every server is shut down.
func RunOverload(ctx context.Context, opts OverloadOptions) (*OverloadReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep := &OverloadReport{Options: opts}
	// The virtual runs first: they also validate every case and control
	// (sim.ErrModel) before any server starts.
	virtual := make([][]sim.OverloadResult, len(opts.Cases))
	for i, c := range opts.Cases {
		for _, ctl := range opts.Controls {
			m := c.Model
			res, err := sim.RunOverload(ctx, &m, ctl, opts.Seed)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: case %s: %w", ErrScenario, opts.Scenario, c.Name, err)
			}
			res.Series = sim.Series{}
			virtual[i] = append(virtual[i], res)
		}
	}
	for ci, c := range opts.Cases {
		m := c.Model
		sched := overloadSchedule(&m, opts.Seed)
		start := time.Now()
		rows, err := runPolicies(opts.Controls, opts.Sequential, func(ctl sim.ServerControl) (OverloadRow, error) {
			if opts.Sequential {
				return runOverloadControl(ctx, &m, ctl, opts.Seed, time.Now(), sched)
			}
			return runOverloadControl(ctx, &m, ctl, opts.Seed, start, sched)
		})
		if err != nil {
			return nil, err
		}
		for i := range rows {
			rows[i].Virtual = virtual[ci][i]
		}
		rep.Cases = append(rep.Cases, OverloadCaseReport{Case: c, Rows: rows})
	}
	rep.ElapsedS = time.Since(began).Seconds()
	return rep, nil
}

// overloadSchedule draws the calls as sim.RunOverload does: each client a
// Poisson process of Rate for Duration, and the surge's Poisson streams
// (clients Clients to 2×Clients−1) during the trigger.
func overloadSchedule(m *sim.OverloadModel, seed uint64) []openCall {
	out := arrivalSchedule(sim.Arrival{Kind: sim.Poisson, Rate: m.Rate}, m.Clients, m.Duration, seed, MaxCalls)
	if t := m.Trigger; t.Surge > 0 {
		a := sim.Arrival{Kind: sim.Poisson, Rate: t.Surge / float64(m.Clients)}
		end := min(t.End, m.Duration)
		for c := range m.Clients {
			st := a.Stream(seed, m.Clients+c)
			for at := t.Start + st.First(); at < end && len(out) < MaxCalls; at += st.Next() {
				out = append(out, openCall{At: at, Client: m.Clients + c})
			}
		}
		slices.SortStableFunc(out, func(a, b openCall) int {
			if c := cmp.Compare(a.At, b.At); c != 0 {
				return c
			}
			return cmp.Compare(a.Client, b.Client)
		})
	}
	return out
}

// overloadServer is one control's database and the figures it keeps.
type overloadServer struct {
	m     *sim.OverloadModel
	start time.Time
	inner http.Handler
	// life ends the work detached from its callers when the run ends.
	life context.Context
	inj  *faultinject.Injector
	lim  *admission.Limiter

	rngMu sync.Mutex
	rng   *rand.Rand

	mu                     sync.Mutex
	waits                  []time.Duration
	served, inTime         int
	arrived, shed          int
	limitSum, limitSamples float64
}

type overloadReqKey struct{}

// overloadReq is what the server knows of a request: when it reached the
// database, and its caller's context (the work runs detached from it).
type overloadReq struct {
	arrive time.Time
	caller context.Context
}

func (s *overloadServer) now() time.Duration { return time.Since(s.start) }

func (s *overloadServer) inWindow(t time.Duration) bool {
	return t >= s.m.Window[0] && t < s.m.Window[1]
}

// leg waits the trigger's extra latency if it is on, or until ctx ends;
// it reports whether ctx is still alive.
func (s *overloadServer) leg(ctx context.Context) bool {
	t := s.m.Trigger
	if now := s.now(); t.Extra <= 0 || now < t.Start || now >= t.End {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(t.Extra)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ServeHTTP is the network leg in, the database, the leg out. The leg in
// ends whether or not the caller has left meanwhile, as in sim: a query
// on its way cannot know that its caller timed out, and reaches the
// database (where the admission queue drops it, and a plain queue serves
// it).
func (s *overloadServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.leg(s.life) {
		return // the run is over
	}
	arrive := time.Now()
	at := arrive.Sub(s.start)
	cw := &captureWriter{h: http.Header{}}
	ctx := context.WithValue(r.Context(), overloadReqKey{}, &overloadReq{arrive: arrive, caller: r.Context()})
	s.inner.ServeHTTP(cw, r.WithContext(ctx))
	if s.inWindow(at) {
		s.mu.Lock()
		s.arrived++
		if cw.status() != http.StatusOK {
			s.shed++
		}
		s.mu.Unlock()
	}
	if !s.leg(r.Context()) {
		return
	}
	for k, v := range cw.h {
		w.Header()[k] = v
	}
	w.WriteHeader(cw.status())
}

// work holds a request for its service time, whether or not its caller
// is still there, and notes its wait and whether it ended in time.
func (s *overloadServer) work(w http.ResponseWriter, r *http.Request) {
	q, _ := r.Context().Value(overloadReqKey{}).(*overloadReq)
	began := time.Now()
	s.rngMu.Lock()
	d := s.m.Service.Sample(s.rng)
	s.rngMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return // the run is over
	}
	if q != nil && s.inWindow(began.Sub(s.start)) {
		s.mu.Lock()
		s.served++
		s.waits = append(s.waits, began.Sub(q.arrive))
		if q.caller.Err() == nil {
			s.inTime++
		}
		s.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

// detach runs h with a context its caller's departure does not end, only
// the end of life: the database serves what it has taken, as sim's does.
func detach(life context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		defer context.AfterFunc(life, cancel)()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// captureWriter keeps an answer's status and headers until the leg out.
type captureWriter struct {
	h    http.Header
	code int
}

func (c *captureWriter) Header() http.Header { return c.h }
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return len(b), nil
}
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *captureWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

func newOverloadServer(life context.Context, m *sim.OverloadModel, ctl sim.ServerControl, seed uint64, start time.Time) (*overloadServer, error) {
	s := &overloadServer{m: m, start: start, life: life, rng: rand.New(rand.NewPCG(seed, 0x5e41))}
	queue := unboundedQueue
	if ctl.Kind == sim.ControlNone && ctl.Queue > 0 {
		queue = ctl.Queue
	}
	s.inj = faultinject.New(faultinject.Config{Rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: m.Workers, Queue: queue}}, Seed: seed})
	pool := detach(life, s.inj.Handler(http.HandlerFunc(s.work)))
	switch ctl.Kind {
	case sim.ControlNone:
		s.inner = pool
	case sim.ControlStatic:
		if ctl.Limit < 1 {
			return nil, fmt.Errorf("%w: control %s: a static limit of %d would admit nothing", ErrScenario, ctl.Name, ctl.Limit)
		}
		s.inner = layer.Limit(ctl.Limit, pool)
	case sim.ControlAdmission:
		var alg admission.Limit
		if ctl.NewLimit != nil {
			alg = ctl.NewLimit()
		}
		lim, err := admission.New(admission.Config{Limit: alg, Seed: seed, QueueLength: ctl.Queue})
		if err != nil {
			return nil, err
		}
		s.lim = lim
		s.inner = layer.Adaptive(lim, pool)
	default:
		return nil, fmt.Errorf("%w: control %s: unknown kind %d", ErrScenario, ctl.Name, ctl.Kind)
	}
	return s, nil
}

func runOverloadControl(ctx context.Context, m *sim.OverloadModel, ctl sim.ServerControl, seed uint64, start time.Time, sched []openCall) (OverloadRow, error) {
	row := OverloadRow{Control: ctl}
	life, end := context.WithCancel(context.Background())
	defer end()
	s, err := newOverloadServer(life, m, ctl, seed, start)
	if err != nil {
		return row, err
	}
	srv, err := serveLoopback(s)
	if err != nil {
		return row, err
	}
	defer srv.close()
	defer s.inj.Close()
	defer end() // before the server's shutdown: no work outlives the run
	base := &http.Transport{Proxy: nil, MaxIdleConns: 0, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base}

	horizon := m.Duration + m.Drain
	n := int(horizon/sim.DefaultBucket) + 1
	rec := sim.NewRecording(sim.DefaultBucket, n)
	rec.QueueSlack = int32(float64(m.Workers) * sim.RecoveryQueueShare)
	var mu sync.Mutex // rec
	bucket := func() int { return rec.Index(time.Since(start)) }

	// The gauges, sampled every bucket.
	queue, conc := sim.NewGauge(n), sim.NewGauge(n)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	stopSampler := sync.OnceFunc(func() { close(stop); <-sampled })
	defer stopSampler() // on every path, a panic's included
	go func() {
		defer close(sampled)
		t := time.NewTicker(sim.DefaultBucket)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			snap := s.inj.Snapshot()
			waiting := snap.Waiting
			if s.lim != nil {
				waiting += s.lim.Queued()
				if s.inWindow(time.Since(start)) {
					s.limitSum += float64(s.lim.Limit())
					s.limitSamples++
				}
			}
			b := bucket()
			queue.Set(b, int32(waiting))
			conc.Set(b, int32(waiting+snap.InFlight))
		}
	}()

	runCtx, cancel := context.WithDeadline(ctx, start.Add(horizon))
	defer cancel()
	row.StartLagMax = runOpenLoop(runCtx, start, sched, func(c openCall) {
		began := time.Now()
		mu.Lock()
		rec.Calls++
		mu.Unlock()
		ok := false
		for a := 1; a <= m.Attempts && !ok && runCtx.Err() == nil; a++ {
			mu.Lock()
			b := bucket()
			rec.Attempts[b]++
			if a > 1 {
				rec.Retries[b]++
			}
			mu.Unlock()
			ok = overloadAttempt(runCtx, client, srv.url, m.Timeout)
			mu.Lock()
			if b = bucket(); ok {
				rec.AttemptsOK[b]++
			} else {
				rec.AttemptsFailed[b]++
			}
			mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		if runCtx.Err() != nil && !ok {
			rec.Open = append(rec.Open, time.Since(began))
			return
		}
		if b := bucket(); ok {
			rec.CallsOK[b]++
		} else {
			rec.CallsFailed[b]++
		}
		rec.Latencies = append(rec.Latencies, time.Since(began))
	})
	stopSampler()
	if err := ctx.Err(); err != nil {
		return row, err
	}
	rec.Queue, rec.Concurrency = queue.Peaks(), conc.Peaks()
	slices.Sort(rec.Latencies)
	slices.Sort(rec.Open)
	faults := []sim.Fault{{Kind: sim.FaultLatency, Start: m.Trigger.Start, End: m.Trigger.End}}
	row.Metrics = rec.Metrics(m.Warmup, m.Duration, faults)

	w := (m.Window[1] - m.Window[0]).Seconds()
	var ok, att int64
	for i := rec.Index(m.Window[0]); i < rec.Index(m.Window[1]) && i < rec.Len(); i++ {
		ok += int64(rec.CallsOK[i])
		att += int64(rec.Attempts[i])
	}
	st := &row.Stats
	st.Goodput = float64(ok) / w
	st.GoodputShare = st.Goodput / m.Capacity()
	st.Offered = float64(att) / w
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Served = float64(s.served) / w
	if s.served > 0 {
		st.InTime = float64(s.inTime) / float64(s.served)
	}
	st.WaitP50ms = percentile(s.waits, 0.50).Seconds() * 1000
	st.WaitP99ms = percentile(s.waits, 0.99).Seconds() * 1000
	if s.arrived > 0 {
		st.Shed = float64(s.shed) / float64(s.arrived)
	}
	if s.limitSamples > 0 {
		st.LimitMean = s.limitSum / s.limitSamples
	}
	return row, nil
}

// overloadAttempt sends one GET under timeout: whether it was answered
// 200.
func overloadAttempt(ctx context.Context, client *http.Client, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
