package live

import (
	"context"
	"errors"
	"fmt"
	"github.com/stormguard/stormguard/layer"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// Headers of the live protocol.
const (
	// AttemptHeader carries the attempt number ("1" for a call's first
	// attempt), which httpretry announces on every attempt.
	AttemptHeader = layer.HeaderAttempt
	// KeyHeader is the idempotency key of a call; httpretry retries a POST
	// that carries it.
	KeyHeader = "Idempotency-Key"
)

// maxBody is the most of a request body the server reads.
const maxBody = 64 << 10

// minGrace is the least time a server is given to finish its handlers
// after its clients are done.
const minGrace = time.Second

// ErrNotLoopback is returned when the live server's listener is not on a
// loopback address (which should never happen: it listens on 127.0.0.1).
var ErrNotLoopback = errors.New("live: listener is not on loopback")

// server is one run's downstream: an http.Server on 127.0.0.1 whose
// handler counts arrivals, drops lost requests, then hands the request to
// a faultinject middleware (limit, outages) around the work handler.
type server struct {
	sc    *Scenario
	rules faultinject.Rules
	ln    net.Listener
	url   string

	// Set by start.
	rec   *recorder
	in    *faultinject.Injector
	srv   *http.Server
	inner http.Handler
	keys  keyTracker

	closing  chan struct{}  // closed by stop: ends lost and unheeded waits
	wg       sync.WaitGroup // Serve, the sampler, the capacity schedule
	handlers gate           // requests being handled

	rmu sync.Mutex
	rnd *rand.Rand

	holdReplies bool // a reply-loss or latency fault exists: answers are held to decide

	// The capacity schedule: the window boundaries of the capacity
	// faults, in order, and how many of them are applied. A boundary is
	// applied by the schedule's timer or by the first request that
	// reaches the injector at or after it, whichever comes first, so a
	// late timer (a loaded machine) never lets requests in at the old
	// capacity.
	capMu     sync.Mutex
	capBounds []time.Duration
	capDone   atomic.Int32
	capLate   time.Duration // added to the schedule's timer: a test's stand-in for a loaded machine
}

// newServer listens on 127.0.0.1 and prepares the rules; start serves.
func newServer(sc *Scenario, seed uint64) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("live: listen: %w", err)
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: %v", ErrNotLoopback, ln.Addr())
	}
	s := &server{
		sc:      sc,
		ln:      ln,
		url:     "http://" + addr.String() + "/report",
		closing: make(chan struct{}),
		rnd:     rand.New(rand.NewPCG(seed, seed^0xda942042e4dd58b5)),
	}
	s.handlers.idle.L = &s.handlers.mu
	s.rules.Limit = sc.Server.Limit
	for _, f := range sc.Faults {
		switch f.Kind {
		case sim.FaultReplyLoss, sim.FaultLatency:
			s.holdReplies = true
		case sim.FaultUnavailable:
			s.rules.Outages = append(s.rules.Outages, faultinject.Window{Start: f.Start, End: f.End, Action: faultinject.Abort, Status: http.StatusServiceUnavailable})
		case sim.FaultHang:
			s.rules.Outages = append(s.rules.Outages, faultinject.Window{Start: f.Start, End: f.End, Action: faultinject.Hang})
		case sim.FaultCapacity:
			s.capBounds = append(s.capBounds, f.Start, f.End)
		}
	}
	slices.Sort(s.capBounds)
	s.capBounds = slices.Compact(s.capBounds)
	if err := s.rules.Validate(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrScenario, sc.Name, err)
	}
	return s, nil
}

// start serves from now on; the outage schedule and the recorder count
// from rec.start.
func (s *server) start(rec *recorder, seed uint64, sampleEvery time.Duration) {
	s.rec = rec
	s.in = faultinject.New(faultinject.Config{Rules: s.rules, Seed: seed, Epoch: rec.start})
	s.inner = s.in.Handler(http.HandlerFunc(s.work))
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(s.ln) // returns http.ErrServerClosed on shutdown
	}()
	go func() {
		defer s.wg.Done()
		s.sample(sampleEvery)
	}()
	if len(s.capBounds) > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.scheduleCapacity()
		}()
	}
}

// stop shuts the server down: gracefully until grace, so that handlers
// end by themselves once they notice their callers have gone (or finish
// the service they do not stop, with Server.IgnoreCancel); then it
// releases whatever still waits (unheeded services, lost and hanging
// requests, the queue), closes every connection, and waits for every
// handler and goroutine of the server. It returns the injector's final
// counters.
func (s *server) stop(grace time.Time) faultinject.Counters {
	ctx, cancel := context.WithDeadline(context.Background(), grace)
	err := s.srv.Shutdown(ctx)
	cancel()
	close(s.closing)
	s.in.Close()
	if err != nil {
		_ = s.srv.Close()
	}
	s.handlers.closeAndWait()
	s.wg.Wait()
	return s.in.Snapshot()
}

// gate counts the requests being handled, and once closed admits no more,
// so that stop can wait for the last one (a sync.WaitGroup may not gain
// members while it is being waited for).
type gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   sync.Cond
}

// enter admits a request; false once the gate is closed.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	g.n--
	if g.n == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// closeAndWait closes the gate and waits until no request is inside.
func (g *gate) closeAndWait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for g.n > 0 {
		g.idle.Wait()
	}
}

// ServeHTTP is the outer layer: it counts the attempt on the wire, reads
// the request (so that net/http watches the connection and cancels the
// request's context as soon as its caller goes away, even while the
// request waits in the queue), applies loss faults, then hands over to
// the injector.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.handlers.enter() {
		return // shutting down: the run is over
	}
	defer s.handlers.leave()
	n, _ := strconv.Atoi(r.Header.Get(AttemptHeader))
	s.rec.arrived(n > 1)
	defer s.rec.left()
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	}
	if s.lose(s.rec.since()) {
		s.rec.lost.Add(1)
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return
	}
	// A latency fault delays the request's leg: the server takes it only
	// then, holding nothing meanwhile (sim adds Extra to each network leg).
	if d := s.netDelay(s.rec.since()); d > 0 && !s.pause(r.Context(), d) {
		return
	}
	// The request waits for a worker from here until the work handler
	// starts it, or the injector answers it without (refused, aborted,
	// given up while queued).
	// (A request met by a hang window hangs instead: it is not queued,
	// as the simulator does not queue it.)
	if s.sc.Server.IgnoreCancel {
		// A server that does not notice its callers going away keeps
		// their requests queued and serves them: the injector's queue
		// must not drop them either. The work handler still learns from
		// the caller's own context when it left, to count wasted work.
		r = r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), callerKey{}, r.Context()))
	}
	if !s.hanging(s.rec.since()) {
		wait := &waitMark{}
		s.rec.queueChanged(1)
		r = r.WithContext(context.WithValue(r.Context(), waitKey{}, wait))
		defer wait.leave(s.rec)
	}
	if int(s.capDone.Load()) < len(s.capBounds) { // no clock read once every boundary is applied
		s.applyCapacity(s.rec.since())
	}
	if !s.holdReplies {
		s.inner.ServeHTTP(w, r)
		return
	}
	// A reply-loss or latency fault: hold the answer until the work is
	// done, then lose it (the caller hears nothing until it gives up), or
	// delay it (the reply's leg), then send it.
	held := &heldReply{header: http.Header{}}
	s.inner.ServeHTTP(held, r)
	if d := s.netDelay(s.rec.since()); d > 0 && !s.pause(r.Context(), d) {
		return // the caller has gone
	}
	if s.loseReply(s.rec.since()) {
		s.rec.repliesLost.Add(1)
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return
	}
	held.sendTo(w)
}

// callerKey carries, with Server.IgnoreCancel, the caller's own request
// context past the detached one the injector sees.
type callerKey struct{}

// netDelay returns the extra network latency of a leg sent at at (the sum
// of the latency faults in force).
func (s *server) netDelay(at time.Duration) time.Duration {
	var d time.Duration
	for i := range s.sc.Faults {
		f := &s.sc.Faults[i]
		if f.Kind == sim.FaultLatency && at >= f.Start && at < f.End {
			s.rmu.Lock()
			d += f.Extra.Sample(s.rnd)
			s.rmu.Unlock()
		}
	}
	return d
}

// pause waits d, or until ctx ends or the server closes; it reports
// whether the wait ran its course.
func (s *server) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// waitKey carries a request's waitMark to the work handler.
type waitKey struct{}

// waitMark ends a request's wait for a worker once, whichever comes
// first: the work handler starting it or the injector answering it.
type waitMark struct{ done atomic.Bool }

func (m *waitMark) leave(rec *recorder) {
	if m.done.CompareAndSwap(false, true) {
		rec.queueChanged(-1)
	}
}

// heldReply is a response kept back until the server decides whether a
// reply-loss fault loses it.
type heldReply struct {
	header http.Header
	status int
	body   []byte
}

func (h *heldReply) Header() http.Header { return h.header }

func (h *heldReply) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldReply) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	h.body = append(h.body, b...)
	return len(b), nil
}

// sendTo writes the held response to w; nothing when none was written.
func (h *heldReply) sendTo(w http.ResponseWriter) {
	if h.status == 0 {
		return
	}
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(h.status)
	_, _ = w.Write(h.body)
}

// work is the downstream's handler: it holds the request for its service
// time, then answers 200 (or 500 when it fails). It stops as soon as the
// request's context ends, unless Server.IgnoreCancel is set.
func (s *server) work(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if caller, ok := ctx.Value(callerKey{}).(context.Context); ok {
		ctx = caller // IgnoreCancel: watch the caller, not the detached request
	}
	if wait, ok := ctx.Value(waitKey{}).(*waitMark); ok {
		wait.leave(s.rec) // it has a worker now
	}
	key := r.Header.Get(KeyHeader)
	s.keys.begin(key)
	begin := time.Now()
	at := begin.Sub(s.rec.start)
	d, fail := s.draw(at)

	var gaveUp time.Time // when the handler learnt its caller had gone
	abandoned := ctx.Err() != nil
	if abandoned {
		gaveUp = begin
	}
	cut := false // the service was cut short
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		if gaveUp.IsZero() {
			gaveUp = time.Now()
		}
		if !s.sc.Server.IgnoreCancel {
			cut = true
			break
		}
		select {
		case <-t.C:
		case <-s.closing:
			cut = true
		}
	case <-s.closing:
		cut = true
	}
	t.Stop()
	end := time.Now()
	var wasted time.Duration
	if !gaveUp.IsZero() {
		wasted = end.Sub(gaveUp)
	}
	s.keys.end(key, !cut)
	s.rec.executed(end.Sub(begin), wasted, !gaveUp.IsZero(), abandoned, fail && !cut)
	switch {
	case cut:
		// The caller is gone (or the run is over): nothing to answer.
	case fail:
		http.Error(w, "live: injected server error", http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}
}

// draw returns the service time of a request starting service at (time
// since the start of the run) and whether it fails.
func (s *server) draw(at time.Duration) (time.Duration, bool) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	d := s.sc.Server.Service.Sample(s.rnd)
	fail := s.sc.Server.FailProb > 0 && s.rnd.Float64() < s.sc.Server.FailProb
	for i := range s.sc.Faults {
		f := &s.sc.Faults[i]
		if at < f.Start || at >= f.End {
			continue
		}
		switch f.Kind {
		case sim.FaultSlow:
			d += f.Extra.Sample(s.rnd)
		case sim.FaultErrors:
			if s.rnd.Float64() < f.Prob {
				fail = true
			}
		}
	}
	return d, fail
}

// hanging reports whether a hang window holds requests arriving at at.
func (s *server) hanging(at time.Duration) bool {
	for _, f := range s.sc.Faults {
		if f.Kind == sim.FaultHang && at >= f.Start && at < f.End {
			return true
		}
	}
	return false
}

// lose reports whether a request arriving at at is lost (gets no answer).
func (s *server) lose(at time.Duration) bool { return s.drawLoss(sim.FaultLoss, at) }

// loseReply reports whether a reply sent at at is lost, after the work.
func (s *server) loseReply(at time.Duration) bool { return s.drawLoss(sim.FaultReplyLoss, at) }

// drawLoss draws, for each fault of the kind in force at at, whether it
// loses the packet.
func (s *server) drawLoss(kind sim.FaultKind, at time.Duration) bool {
	for i := range s.sc.Faults {
		f := &s.sc.Faults[i]
		if f.Kind != kind || at < f.Start || at >= f.End {
			continue
		}
		s.rmu.Lock()
		x := s.rnd.Float64()
		s.rmu.Unlock()
		if x < f.Prob {
			return true
		}
	}
	return false
}

// sample records the injector's queue and busy workers every interval.
func (s *server) sample(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c := s.in.Snapshot()
		s.rec.sampled(c.InFlight)
		select {
		case <-t.C:
		case <-s.closing:
			return
		}
	}
}

// scheduleCapacity applies capacity faults at each window boundary, by
// the timer; applyCapacity does the same for a request that arrives first.
func (s *server) scheduleCapacity() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, b := range s.capBounds {
		t.Reset(time.Until(s.rec.start.Add(b)) + s.capLate)
		select {
		case <-t.C:
		case <-s.closing:
			return
		}
		s.applyCapacity(b)
	}
}

// applyCapacity applies every capacity boundary at or before at that is
// not applied yet: it sets the injector's concurrency to the smallest
// Factor in force. One atomic load when there is nothing to do.
func (s *server) applyCapacity(at time.Duration) {
	n := int(s.capDone.Load())
	if n >= len(s.capBounds) || s.capBounds[n] > at {
		return
	}
	s.capMu.Lock()
	defer s.capMu.Unlock()
	n = int(s.capDone.Load())
	for n < len(s.capBounds) && s.capBounds[n] <= at {
		n++
	}
	if n == int(s.capDone.Load()) {
		return
	}
	b := s.capBounds[n-1] // the latest boundary passed decides the factor
	factor := 1.0
	for _, f := range s.sc.Faults {
		if f.Kind == sim.FaultCapacity && f.Start <= b && b < f.End {
			factor = min(factor, f.Factor)
		}
	}
	rules := s.rules.Clone()
	rules.Limit.Concurrency = sim.CapacityWorkers(rules.Limit.Concurrency, factor) // as sim rounds
	_ = s.in.Update(rules)                                                         // valid: only the concurrency changed, to a positive value
	s.capDone.Store(int32(n))
}
