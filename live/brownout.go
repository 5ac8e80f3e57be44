package live

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// The policies RunBrownout compares (issue #22), by BrownoutPolicy.Name.
const (
	// BrownoutNoHedge sends each call once: the baseline.
	BrownoutNoHedge = "no-hedging"
	// BrownoutHedge hedges once after the fixed delay, unbudgeted.
	BrownoutHedge = "hedge"
	// BrownoutHedgeBudget hedges the same way under a retry budget
	// (budget.TenPercent) shared by every client.
	BrownoutHedgeBudget = "hedge+budget"
)

// BrownoutPolicy is how the clients of RunBrownout send their calls.
type BrownoutPolicy struct {
	// Name labels the row.
	Name string
	// Hedge sends the calls through hedge.Transport: one hedge (MaxHedges
	// 1, Policy.MaxAttempts 2) after BrownoutOptions.Delay, or after an
	// adaptive delay with Adaptive. Otherwise each call is one request.
	Hedge bool
	// Adaptive takes the hedge delay from hedge.NewAdaptive (p95 of the
	// last 10s, floor 1ms; BrownoutOptions.Delay until it has samples).
	Adaptive bool
	// Budget puts the hedges under one budget.NewRatio(budget.TenPercent())
	// shared by every client.
	Budget bool
}

// BrownoutPolicies returns issue #22's comparison: no hedging, hedging
// after a fixed delay, and the same under a 10% retry budget.
func BrownoutPolicies() []BrownoutPolicy {
	return []BrownoutPolicy{
		{Name: BrownoutNoHedge},
		{Name: BrownoutHedge, Hedge: true},
		{Name: BrownoutHedgeBudget, Hedge: true, Budget: true},
	}
}

// Defaults of BrownoutOptions.
const (
	DefaultBrownoutClients     = 20
	DefaultBrownoutDuration    = 3 * time.Second
	DefaultBrownoutInterval    = 100 * time.Millisecond
	DefaultBrownoutService     = 5 * time.Millisecond
	DefaultBrownoutSlowService = 100 * time.Millisecond
	DefaultBrownoutDelay       = 25 * time.Millisecond
	DefaultBrownoutCallTimeout = 5 * time.Second
	DefaultBrownoutMaxCalls    = 5000
)

// BrownoutOptions configure RunBrownout. Zero fields take the defaults.
type BrownoutOptions struct {
	// Clients is the number of client goroutines (default 20, at most
	// DefaultMaxClients). Each starts a call every Interval (default
	// 100ms) from a phase spread over the interval, whether or not its
	// earlier calls have ended (open loop: a slow server does not slow the
	// arrivals), until Duration (default 3s).
	Clients  int
	Interval time.Duration
	Duration time.Duration
	// SlowStart and SlowEnd bound the brownout (default: the middle
	// third of Duration): a request arriving in it is served in
	// SlowService (default 100ms) instead of Service (default 5ms), for
	// everyone. The server has no concurrency limit; a request whose
	// caller cancels it stops at once.
	SlowStart, SlowEnd   time.Duration
	Service, SlowService time.Duration
	// Delay is the hedge delay (default 25ms: well above Service, well
	// below SlowService).
	Delay time.Duration
	// CallTimeout bounds each call (default 5s).
	CallTimeout time.Duration
	// MaxCalls bounds the calls of one policy (default 5000).
	MaxCalls int
	// Policies are compared (default BrownoutPolicies()), at the same
	// time, each with its own server.
	Policies []BrownoutPolicy
}

func (o *BrownoutOptions) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: brownout: "+format, append([]any{ErrScenario}, args...)...)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Clients == 0 {
		o.Clients = DefaultBrownoutClients
	}
	def(&o.Interval, DefaultBrownoutInterval)
	def(&o.Duration, DefaultBrownoutDuration)
	if o.SlowStart == 0 && o.SlowEnd == 0 {
		o.SlowStart, o.SlowEnd = o.Duration/3, 2*o.Duration/3
	}
	def(&o.Service, DefaultBrownoutService)
	def(&o.SlowService, DefaultBrownoutSlowService)
	def(&o.Delay, DefaultBrownoutDelay)
	def(&o.CallTimeout, DefaultBrownoutCallTimeout)
	if o.MaxCalls == 0 {
		o.MaxCalls = DefaultBrownoutMaxCalls
	}
	if o.Policies == nil {
		o.Policies = BrownoutPolicies()
	}
	switch {
	case o.Clients < 0 || o.Clients > DefaultMaxClients:
		return bad("clients must be in [1, %d], got %d", DefaultMaxClients, o.Clients)
	case o.Interval < 0 || o.Duration < 0 || o.Duration > MaxDuration:
		return bad("interval must be positive and duration in (0, %s]", MaxDuration)
	case o.SlowStart < 0 || o.SlowEnd <= o.SlowStart || o.SlowEnd > o.Duration:
		return bad("slowdown [%s, %s) must be non-empty and within the duration", o.SlowStart, o.SlowEnd)
	case o.Service < 0 || o.SlowService < 0 || o.SlowService > MaxDuration || o.Delay < 0:
		return bad("service times and delay must not be negative")
	case o.CallTimeout < 0 || o.CallTimeout > MaxDuration:
		return bad("call timeout must be in (0, %s]", MaxDuration)
	case o.MaxCalls < 0 || o.MaxCalls > MaxCalls:
		return bad("max calls must be in [1, %d], got %d", MaxCalls, o.MaxCalls)
	case len(o.Policies) == 0:
		return bad("no policy to run")
	}
	if n := float64(o.Clients) * o.Duration.Seconds() / o.Interval.Seconds(); n > MaxCallRate*o.Duration.Seconds() {
		return bad("the clients would start %.0f calls per second, more than %d", n/o.Duration.Seconds(), MaxCallRate)
	}
	return nil
}

// BrownoutReport is what RunBrownout measured, one row per policy.
type BrownoutReport struct {
	// Options are the options as run, defaults filled in.
	Options BrownoutOptions
	// Rows are in the order of Options.Policies.
	Rows []BrownoutRow
}

// BrownoutRow is one policy's run. "Before" is the time before the
// slowdown, "slow" the slowdown, both by when a call started.
type BrownoutRow struct {
	// Policy is the policy run.
	Policy BrownoutPolicy
	// Calls counts the calls made; BeforeCalls and SlowCalls those
	// started before and during the slowdown.
	Calls, BeforeCalls, SlowCalls int
	// Requests counts the requests the server received, on the wire;
	// BeforeRequests and SlowRequests those of the calls started before
	// and during the slowdown.
	Requests, BeforeRequests, SlowRequests int64
	// BeforeLoad and SlowLoad are requests per call before and during the
	// slowdown: the offered load relative to the calls (1: no hedge sent;
	// 2: every call doubled).
	BeforeLoad, SlowLoad float64
	// Cancelled counts the requests whose caller cancelled them while the
	// server held them (hedge losers, mostly).
	Cancelled int64
	// PeakInFlight is the most requests the server held at once.
	PeakInFlight int64
	// Success is the share of calls answered 200.
	Success float64
	// StartLagMax is how late the clients started a call against their
	// schedule at worst: a check on the harness (a machine that falls
	// behind measures itself, not the policy).
	StartLagMax time.Duration
	// P50, P99 are end-to-end latencies of all calls; SlowP50 and SlowP99
	// those of the calls started during the slowdown.
	P50, P99, SlowP50, SlowP99 time.Duration
}

// Row returns the row of the policy called name.
func (r *BrownoutReport) Row(name string) (BrownoutRow, bool) {
	for _, row := range r.Rows {
		if row.Policy.Name == name {
			return row, true
		}
	}
	return BrownoutRow{}, false
}

// Table renders the report as a sim.Table (its WriteTo prints it).
func (r *BrownoutReport) Table() sim.Table {
	o := r.Options
	t := sim.Table{
		Title: fmt.Sprintf("Live brownout with hedging: %d clients every %s, service %s rising to %s for everyone during %s–%s, hedge after %s",
			o.Clients, o.Interval, o.Service, o.SlowService, o.SlowStart, o.SlowEnd, o.Delay),
		Header: []string{"policy", "calls", "req/call before", "req/call slow", "cancelled", "peak in flight", "success", "p50", "p99", "p50 slow", "p99 slow", "lag"},
		Notes: []string{
			"req/call: requests reaching the server (on the wire) per call, for calls started before / during the slowdown",
			"hedge: hedge.Transport, one hedge after the delay; hedge+budget: the same under one budget.TenPercent shared by every client",
			"lag: how late the clients started a call against their schedule at worst (a check on the harness)",
		},
	}
	d := func(v time.Duration) string { return v.Round(10 * time.Microsecond).String() }
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []string{
			row.Policy.Name, fmt.Sprint(row.Calls),
			fmt.Sprintf("%.2f", row.BeforeLoad), fmt.Sprintf("%.2f", row.SlowLoad),
			fmt.Sprint(row.Cancelled), fmt.Sprint(row.PeakInFlight),
			fmt.Sprintf("%.1f%%", 100*row.Success),
			d(row.P50), d(row.P99), d(row.SlowP50), d(row.SlowP99), d(row.StartLagMax),
		})
	}
	return t
}

// WriteTo prints the report's table to w.
func (r *BrownoutReport) WriteTo(w io.Writer) (int64, error) { return r.Table().WriteTo(w) }

// brownoutPhaseHeader carries the phase of the call a request belongs to
// ("before", "slow"); hedge.Transport copies it to every copy.
const brownoutPhaseHeader = "Live-Brownout-Phase"

// RunBrownout runs issue #22's brownout live: for each policy a real HTTP
// server on 127.0.0.1 whose service time rises for everyone during the
// slowdown, and open-loop clients calling it with GETs (hedgeable) through
// hedge.Transport (or a plain transport for the baseline). The server
// counts every request it receives and those cancelled by their caller.
// Policies run at the same time. RunBrownout returns when every call has
// ended and every server is shut down.
func RunBrownout(ctx context.Context, opts BrownoutOptions) (*BrownoutReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	rows, err := runPolicies(opts.Policies, func(p BrownoutPolicy) (BrownoutRow, error) {
		return runBrownoutPolicy(ctx, &opts, p, start)
	})
	if err != nil {
		return nil, err
	}
	return &BrownoutReport{Options: opts, Rows: rows}, nil
}

type brownoutServer struct {
	hits, before, slow, cancelled      atomic.Int64
	inFlight, peak                     atomic.Int64
	start                              time.Time
	slowStart, slowEnd, service, slowS time.Duration
}

func (s *brownoutServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	switch r.Header.Get(brownoutPhaseHeader) {
	case "before":
		s.before.Add(1)
	case "slow":
		s.slow.Add(1)
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	d := s.service
	if at := time.Since(s.start); at >= s.slowStart && at < s.slowEnd {
		d = s.slowS
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		w.WriteHeader(http.StatusOK)
	case <-r.Context().Done():
		s.cancelled.Add(1)
	}
}

func runBrownoutPolicy(ctx context.Context, o *BrownoutOptions, p BrownoutPolicy, start time.Time) (BrownoutRow, error) {
	row := BrownoutRow{Policy: p}
	s := &brownoutServer{start: start, slowStart: o.SlowStart, slowEnd: o.SlowEnd, service: o.Service, slowS: o.SlowService}
	srv, err := serveLoopback(s)
	if err != nil {
		return row, err
	}
	defer srv.close()

	base := &http.Transport{MaxIdleConns: 4 * o.Clients, MaxIdleConnsPerHost: 4 * o.Clients, IdleConnTimeout: 30 * time.Second}
	defer base.CloseIdleConnections()
	var rt http.RoundTripper = base
	if p.Hedge {
		rp := &retry.Policy{Operation: "brownout", MaxAttempts: 2}
		if p.Budget {
			rp.Budget = budget.NewRatio(budget.TenPercent())
		}
		h := &hedge.Hedger{Policy: rp, Delay: o.Delay, MaxHedges: 1}
		if p.Adaptive {
			h.Adaptive = hedge.NewAdaptive(hedge.AdaptiveConfig{})
		}
		rt = &hedge.Transport{Next: base, Hedger: h}
	}
	client := &http.Client{Transport: rt}

	var (
		mu    sync.Mutex
		calls []brownoutCall
		left  atomic.Int64
		lag   atomic.Int64
		wg    sync.WaitGroup
	)
	left.Store(int64(o.MaxCalls))
	for i := range o.Clients {
		wg.Go(func() {
			next := start.Add(o.Interval * time.Duration(i) / time.Duration(o.Clients))
			t := time.NewTimer(time.Until(next))
			defer t.Stop()
			for {
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
				at := time.Since(start)
				if at >= o.Duration || left.Add(-1) < 0 {
					return
				}
				late := int64(time.Since(next))
				for l := lag.Load(); late > l && !lag.CompareAndSwap(l, late); l = lag.Load() {
				}
				phase := ""
				switch {
				case at < o.SlowStart:
					phase = "before"
				case at < o.SlowEnd:
					phase = "slow"
				}
				wg.Go(func() {
					c := brownoutOne(ctx, o, client, srv.url, phase)
					mu.Lock()
					calls = append(calls, c)
					mu.Unlock()
				})
				next = next.Add(o.Interval)
				t.Reset(time.Until(next))
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return row, err
	}

	var all, slow []time.Duration
	ok := 0
	for _, c := range calls {
		all = append(all, c.d)
		if c.ok {
			ok++
		}
		switch c.phase {
		case "before":
			row.BeforeCalls++
		case "slow":
			row.SlowCalls++
			slow = append(slow, c.d)
		}
	}
	row.Calls = len(all)
	row.StartLagMax = time.Duration(lag.Load())
	row.Requests, row.BeforeRequests, row.SlowRequests = s.hits.Load(), s.before.Load(), s.slow.Load()
	row.Cancelled, row.PeakInFlight = s.cancelled.Load(), s.peak.Load()
	if row.BeforeCalls > 0 {
		row.BeforeLoad = float64(row.BeforeRequests) / float64(row.BeforeCalls)
	}
	if row.SlowCalls > 0 {
		row.SlowLoad = float64(row.SlowRequests) / float64(row.SlowCalls)
	}
	if row.Calls > 0 {
		row.Success = float64(ok) / float64(row.Calls)
	}
	row.P50, row.P99 = percentile(all, 0.50), percentile(all, 0.99)
	row.SlowP50, row.SlowP99 = percentile(slow, 0.50), percentile(slow, 0.99)
	return row, nil
}

type brownoutCall struct {
	phase string
	ok    bool
	d     time.Duration
}

// brownoutOne makes one call.
func brownoutOne(ctx context.Context, o *BrownoutOptions, client *http.Client, url, phase string) brownoutCall {
	ctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	c := brownoutCall{phase: phase}
	began := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c
	}
	if phase != "" {
		req.Header.Set(brownoutPhaseHeader, phase)
	}
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.ok = resp.StatusCode == http.StatusOK
	}
	c.d = time.Since(began)
	return c
}
