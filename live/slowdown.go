package live

import (
	"context"
	"encoding/json"
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

// The policies RunSlowdownHedging compares (issue #22), by SlowdownHedgingPolicy.Name.
const (
	// SlowdownNoHedge sends each call once: the baseline (sim's no-hedge
	// of the straggler scenario).
	SlowdownNoHedge = "no-hedge"
	// SlowdownHedge hedges once after the fixed delay, unbudgeted.
	SlowdownHedge = "hedge"
	// SlowdownHedgeBudget hedges the same way under a retry budget
	// (budget.TenPercent) shared by every client.
	SlowdownHedgeBudget = "hedge+budget"
)

// SlowdownHedgingPolicy is how the clients of RunSlowdownHedging send their calls.
type SlowdownHedgingPolicy struct {
	// Name labels the row.
	Name string
	// Hedge sends the calls through hedge.Transport: one hedge (MaxHedges
	// 1, Policy.MaxAttempts 2) after SlowdownHedgingOptions.Delay, or after an
	// adaptive delay with Adaptive. Otherwise each call is one request.
	Hedge bool
	// Adaptive takes the hedge delay from hedge.NewAdaptive (p95 of the
	// last 10s, floor 1ms; SlowdownHedgingOptions.Delay until it has samples).
	Adaptive bool
	// Budget puts the hedges under one budget.NewRatio(budget.TenPercent())
	// shared by every client, or one per client under
	// SlowdownHedgingOptions.Scope PerClient.
	Budget bool
}

// SlowdownHedgingPolicies returns issue #22's comparison: no hedging, hedging
// after a fixed delay, and the same under a 10% retry budget.
func SlowdownHedgingPolicies() []SlowdownHedgingPolicy {
	return []SlowdownHedgingPolicy{
		{Name: SlowdownNoHedge},
		{Name: SlowdownHedge, Hedge: true},
		{Name: SlowdownHedgeBudget, Hedge: true, Budget: true},
	}
}

// Defaults of SlowdownHedgingOptions.
const (
	DefaultSlowdownClients     = 20
	DefaultSlowdownDuration    = 3 * time.Second
	DefaultSlowdownInterval    = 100 * time.Millisecond
	DefaultSlowdownService     = 5 * time.Millisecond
	DefaultSlowdownSlowService = 100 * time.Millisecond
	DefaultSlowdownDelay       = 25 * time.Millisecond
	DefaultSlowdownCallTimeout = 5 * time.Second
	DefaultSlowdownMaxCalls    = 5000
)

// SlowdownHedgingOptions configure RunSlowdownHedging. Zero fields take the defaults.
type SlowdownHedgingOptions struct {
	// Clients is the number of client goroutines (default 20, at most
	// DefaultMaxClients). Each starts a call every Interval (default
	// 100ms) from a phase drawn from Seed, whether or not its earlier
	// calls have ended (open loop: a slow server does not slow the
	// arrivals), until Duration (default 3s).
	Clients  int
	Interval time.Duration
	Duration time.Duration
	// Seed draws the clients' phases (sim.Arrival.Stream): the same seed
	// gives the same schedule.
	Seed uint64
	// Scope says whether the clients share one hedge.Transport, and so
	// one budget and one Adaptive delay (Shared, the default), or own one
	// each (PerClient).
	Scope Scope
	// Sequential runs the policies one after another instead of at the
	// same time.
	Sequential bool
	// IgnoreCancel makes the server finish a request whose caller has
	// cancelled it (a hedge's loser, mostly) instead of stopping at once:
	// SlowdownHedgingRow.Wasted shows the work spent on answers nobody reads.
	IgnoreCancel bool
	// SlowStart and SlowEnd bound the slowdown (default: the middle
	// third of Duration): a request arriving in it is served in
	// SlowService (default 100ms) instead of Service (default 5ms), for
	// everyone. The server has no concurrency limit; a request whose
	// caller cancels it stops at once unless IgnoreCancel is set.
	SlowStart, SlowEnd   time.Duration
	Service, SlowService time.Duration
	// Delay is the hedge delay (default 25ms: well above Service, well
	// below SlowService).
	Delay time.Duration
	// CallTimeout bounds each call (default 5s).
	CallTimeout time.Duration
	// MaxCalls bounds the calls of one policy (default 5000).
	MaxCalls int
	// Policies are compared (default SlowdownHedgingPolicies()), each
	// with its own server, at the same time unless Sequential.
	Policies []SlowdownHedgingPolicy
}

func (o *SlowdownHedgingOptions) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: brownout: "+format, append([]any{ErrScenario}, args...)...)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Clients == 0 {
		o.Clients = DefaultSlowdownClients
	}
	def(&o.Interval, DefaultSlowdownInterval)
	def(&o.Duration, DefaultSlowdownDuration)
	if o.SlowStart == 0 && o.SlowEnd == 0 {
		o.SlowStart, o.SlowEnd = o.Duration/3, 2*o.Duration/3
	}
	def(&o.Service, DefaultSlowdownService)
	def(&o.SlowService, DefaultSlowdownSlowService)
	def(&o.Delay, DefaultSlowdownDelay)
	def(&o.CallTimeout, DefaultSlowdownCallTimeout)
	if o.MaxCalls == 0 {
		o.MaxCalls = DefaultSlowdownMaxCalls
	}
	if o.Policies == nil {
		o.Policies = SlowdownHedgingPolicies()
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
	case o.Scope > PerClient:
		return bad("unknown scope %d", o.Scope)
	case len(o.Policies) == 0:
		return bad("no policy to run")
	}
	if n := float64(o.Clients) * o.Duration.Seconds() / o.Interval.Seconds(); n > MaxCallRate*o.Duration.Seconds() {
		return bad("the clients would start %.0f calls per second, more than %d", n/o.Duration.Seconds(), MaxCallRate)
	}
	return nil
}

// SlowdownHedgingReport is what RunSlowdownHedging measured, one row per policy.
type SlowdownHedgingReport struct {
	// Options are the options as run, defaults filled in.
	Options SlowdownHedgingOptions
	// Rows are in the order of Options.Policies.
	Rows []SlowdownHedgingRow
}

// SlowdownHedgingRow is one policy's run. "Before" is the time before the
// slowdown, "slow" the slowdown, both by when a call started.
type SlowdownHedgingRow struct {
	// Policy is the policy run.
	Policy SlowdownHedgingPolicy
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
	// Wasted is the server's time spent on requests after their caller
	// had cancelled them: next to nothing when the server stops at once,
	// the rest of every loser's service under SlowdownHedgingOptions.IgnoreCancel.
	Wasted time.Duration
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
func (r *SlowdownHedgingReport) Row(name string) (SlowdownHedgingRow, bool) {
	for _, row := range r.Rows {
		if row.Policy.Name == name {
			return row, true
		}
	}
	return SlowdownHedgingRow{}, false
}

// SlowdownHedgingScenario is the name of RunSlowdownHedging's run on the
// command line ("stormsim live slowdown-hedging") and in its JSON. It is
// not sim's brownout (a capacity loss fought with retry limiters): it is
// a slowdown for everyone fought with hedging, closer to sim's straggler.
const SlowdownHedgingScenario = "slowdown-hedging"

// SlowdownHedgingTitle is the title of RunSlowdownHedging's table.
const SlowdownHedgingTitle = "Live slowdown with hedging"

// Table renders the report as a sim.Table (its WriteTo prints it).
func (r *SlowdownHedgingReport) Table() sim.Table {
	o := r.Options
	t := sim.Table{
		Title: fmt.Sprintf("%s: %d clients every %s, service %s rising to %s for everyone during %s–%s, hedge after %s",
			SlowdownHedgingTitle, o.Clients, roundDur(o.Interval), roundDur(o.Service), roundDur(o.SlowService), roundDur(o.SlowStart), roundDur(o.SlowEnd), roundDur(o.Delay)),
		Header: []string{"policy", "calls", "req/call before", "req/call slow", "cancelled", "wasted", "peak in flight", "success", "p50", "p99", "p50 slow", "p99 slow", "lag"},
		Notes: []string{
			"req/call: requests reaching the server (on the wire) per call, for calls started before / during the slowdown",
			SlowdownHedge + ": hedge.Transport, one hedge after the delay; " + SlowdownHedgeBudget + ": the same under one budget.TenPercent shared by every client",
			"wasted: server time spent on requests after their caller cancelled them (the rest of each loser's service when the server ignores cancellation)",
			"lag: how late the clients started a call against their schedule at worst (a check on the harness)",
		},
	}
	d := func(v time.Duration) string { return v.Round(10 * time.Microsecond).String() }
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []string{
			row.Policy.Name, fmt.Sprint(row.Calls),
			fmt.Sprintf("%.2f", row.BeforeLoad), fmt.Sprintf("%.2f", row.SlowLoad),
			fmt.Sprint(row.Cancelled), d(row.Wasted), fmt.Sprint(row.PeakInFlight),
			fmt.Sprintf("%.1f%%", 100*row.Success),
			d(row.P50), d(row.P99), d(row.SlowP50), d(row.SlowP99), d(row.StartLagMax),
		})
	}
	return t
}

// WriteTo prints the report's table to w.
func (r *SlowdownHedgingReport) WriteTo(w io.Writer) (int64, error) { return r.Table().WriteTo(w) }

// MarshalJSON encodes the report as sim's reports are: snake_case keys,
// durations in seconds, and "scenario": "slowdown-hedging".
func (r *SlowdownHedgingReport) MarshalJSON() ([]byte, error) {
	o := r.Options
	type policy struct {
		Name     string `json:"name"`
		Hedge    bool   `json:"hedge,omitempty"`
		Adaptive bool   `json:"adaptive,omitempty"`
		Budget   bool   `json:"budget,omitempty"`
	}
	type row struct {
		Policy         policy  `json:"policy"`
		Calls          int     `json:"calls"`
		BeforeCalls    int     `json:"before_calls"`
		SlowCalls      int     `json:"slow_calls"`
		Requests       int64   `json:"requests"`
		BeforeRequests int64   `json:"before_requests"`
		SlowRequests   int64   `json:"slow_requests"`
		BeforeLoad     float64 `json:"before_load"`
		SlowLoad       float64 `json:"slow_load"`
		Cancelled      int64   `json:"cancelled"`
		WastedS        float64 `json:"wasted_s"`
		PeakInFlight   int64   `json:"peak_in_flight"`
		Success        float64 `json:"success"`
		StartLagMaxS   float64 `json:"start_lag_max_s"`
		P50S           float64 `json:"p50_s"`
		P99S           float64 `json:"p99_s"`
		SlowP50S       float64 `json:"slow_p50_s"`
		SlowP99S       float64 `json:"slow_p99_s"`
	}
	out := struct {
		Scenario     string  `json:"scenario"`
		Title        string  `json:"title"`
		Seed         uint64  `json:"seed"`
		Clients      int     `json:"clients"`
		IntervalS    float64 `json:"interval_s"`
		DurationS    float64 `json:"duration_s"`
		FaultStartS  float64 `json:"fault_start_s"`
		FaultEndS    float64 `json:"fault_end_s"`
		ServiceS     float64 `json:"service_s"`
		SlowServiceS float64 `json:"slow_service_s"`
		DelayS       float64 `json:"delay_s"`
		CallTimeoutS float64 `json:"call_timeout_s"`
		MaxCalls     int     `json:"max_calls"`
		Scope        string  `json:"scope"`
		Sequential   bool    `json:"sequential"`
		IgnoreCancel bool    `json:"ignore_cancel"`
		Rows         []row   `json:"rows"`
	}{
		Scenario: SlowdownHedgingScenario, Title: r.Table().Title, Seed: o.Seed, Clients: o.Clients,
		IntervalS: o.Interval.Seconds(), DurationS: o.Duration.Seconds(), FaultStartS: o.SlowStart.Seconds(), FaultEndS: o.SlowEnd.Seconds(),
		ServiceS: o.Service.Seconds(), SlowServiceS: o.SlowService.Seconds(), DelayS: o.Delay.Seconds(), CallTimeoutS: o.CallTimeout.Seconds(),
		MaxCalls: o.MaxCalls, Scope: o.Scope.String(), Sequential: o.Sequential, IgnoreCancel: o.IgnoreCancel, Rows: []row{},
	}
	for _, rw := range r.Rows {
		out.Rows = append(out.Rows, row{
			Policy: policy{Name: rw.Policy.Name, Hedge: rw.Policy.Hedge, Adaptive: rw.Policy.Adaptive, Budget: rw.Policy.Budget},
			Calls:  rw.Calls, BeforeCalls: rw.BeforeCalls, SlowCalls: rw.SlowCalls,
			Requests: rw.Requests, BeforeRequests: rw.BeforeRequests, SlowRequests: rw.SlowRequests,
			BeforeLoad: rw.BeforeLoad, SlowLoad: rw.SlowLoad, Cancelled: rw.Cancelled, WastedS: rw.Wasted.Seconds(),
			PeakInFlight: rw.PeakInFlight, Success: rw.Success, StartLagMaxS: rw.StartLagMax.Seconds(),
			P50S: rw.P50.Seconds(), P99S: rw.P99.Seconds(), SlowP50S: rw.SlowP50.Seconds(), SlowP99S: rw.SlowP99.Seconds(),
		})
	}
	return json.Marshal(out)
}

// Sim returns the report as a sim.Report for the stormsim command's
// printers and HTML page: its table, the policies' legend and a chart of
// the requests per call before and during the slowdown.
func (r *SlowdownHedgingReport) Sim() *sim.Report {
	t := r.Table()
	rep := &sim.Report{
		Scenario: "live:" + SlowdownHedgingScenario, ModelVersion: sim.ModelVersion, Title: t.Title, Seed: r.Options.Seed, Trials: 1,
		Description: "A real loopback server slows down for everyone for a window; open-loop clients send GETs through hedge.Transport (one hedge after a fixed delay), unbudgeted or under one shared budget.TenPercent, beside a baseline without hedging. Not sim's brownout, which is a capacity loss fought with retry limiters.",
		Tables:      []sim.Table{t},
	}
	pl := sim.Plot{Title: "Requests per call, before and during the slowdown", XLabel: "phase (1: before, 2: slowdown)", YLabel: "requests per call"}
	for _, row := range r.Rows {
		doc := "each call sent once"
		if row.Policy.Hedge {
			doc = "hedge.Transport, one hedge after the delay"
			if row.Policy.Adaptive {
				doc = "hedge.Transport, one hedge after hedge.NewAdaptive's p95 delay"
			}
			if row.Policy.Budget {
				doc += ", under budget.TenPercent"
			}
		}
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{row.Policy.Name, doc})
		pl.Lines = append(pl.Lines, sim.Line{Name: row.Policy.Name, X: []float64{1, 2}, Y: []float64{row.BeforeLoad, row.SlowLoad}})
	}
	rep.Plots = []sim.Plot{pl}
	return rep
}

// brownoutPhaseHeader carries the phase of the call a request belongs to
// ("before", "slow"); hedge.Transport copies it to every copy.
const brownoutPhaseHeader = "Live-Brownout-Phase"

// RunSlowdownHedging runs issue #22's brownout live: for each policy a real HTTP
// server on 127.0.0.1 whose service time rises for everyone during the
// slowdown, and open-loop clients calling it with GETs (hedgeable) through
// hedge.Transport (or a plain transport for the baseline). The server
// counts every request it receives and those cancelled by their caller.
// Policies run at the same time. RunSlowdownHedging returns when every call has
// ended and every server is shut down.
func RunSlowdownHedging(ctx context.Context, opts SlowdownHedgingOptions) (*SlowdownHedgingReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	sched := openSchedule(opts.Clients, opts.Interval, opts.Duration, opts.Seed, opts.MaxCalls)
	start := time.Now()
	rows, err := runPolicies(opts.Policies, opts.Sequential, func(p SlowdownHedgingPolicy) (SlowdownHedgingRow, error) {
		if opts.Sequential {
			return runBrownoutPolicy(ctx, &opts, p, time.Now(), sched)
		}
		return runBrownoutPolicy(ctx, &opts, p, start, sched)
	})
	if err != nil {
		return nil, err
	}
	return &SlowdownHedgingReport{Options: opts, Rows: rows}, nil
}

type brownoutServer struct {
	hits, before, slow, cancelled      atomic.Int64
	inFlight, peak                     atomic.Int64
	wasted                             atomic.Int64 // ns
	start                              time.Time
	slowStart, slowEnd, service, slowS time.Duration
	ignoreCancel                       bool
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
		if !s.ignoreCancel {
			return
		}
		left := time.Now()
		<-t.C // serve on for nobody
		s.wasted.Add(int64(time.Since(left)))
	}
}

func runBrownoutPolicy(ctx context.Context, o *SlowdownHedgingOptions, p SlowdownHedgingPolicy, start time.Time, sched []openCall) (SlowdownHedgingRow, error) {
	row := SlowdownHedgingRow{Policy: p}
	s := &brownoutServer{start: start, slowStart: o.SlowStart, slowEnd: o.SlowEnd, service: o.Service, slowS: o.SlowService, ignoreCancel: o.IgnoreCancel}
	srv, err := serveLoopback(s)
	if err != nil {
		return row, err
	}
	defer srv.close()

	base := &http.Transport{MaxIdleConns: 4 * o.Clients, MaxIdleConnsPerHost: 4 * o.Clients, IdleConnTimeout: 30 * time.Second}
	defer base.CloseIdleConnections()
	transport := func() http.RoundTripper {
		if !p.Hedge {
			return base
		}
		rp := &retry.Policy{Operation: "brownout", MaxAttempts: 2}
		if p.Budget {
			rp.Budget = budget.NewRatio(budget.TenPercent())
		}
		h := &hedge.Hedger{Policy: rp, Delay: o.Delay, MaxHedges: 1}
		if p.Adaptive {
			h.Adaptive = hedge.NewAdaptive(hedge.AdaptiveConfig{})
		}
		return &hedge.Transport{Next: base, Hedger: h}
	}
	clients := []*http.Client{{Transport: transport()}}
	if o.Scope == PerClient {
		for range o.Clients - 1 {
			clients = append(clients, &http.Client{Transport: transport()})
		}
	}

	var (
		mu    sync.Mutex
		calls []brownoutCall
	)
	row.StartLagMax = runOpenLoop(ctx, start, sched, func(c openCall) {
		phase := ""
		switch {
		case c.At < o.SlowStart:
			phase = "before"
		case c.At < o.SlowEnd:
			phase = "slow"
		}
		call := brownoutOne(ctx, o, clients[min(c.Client, len(clients)-1)], srv.url, phase)
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
	})
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
	row.Wasted = time.Duration(s.wasted.Load())
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
func brownoutOne(ctx context.Context, o *SlowdownHedgingOptions, client *http.Client, url, phase string) brownoutCall {
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
