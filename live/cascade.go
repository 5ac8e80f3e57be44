package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// The policies RunCascade compares (issue #20), by CascadePolicy.Name.
const (
	// CascadeNaive retries at every tier: retry.NestedIgnore, the bottom
	// failing with plain 503s. Three tiers of 4 attempts: up to 64
	// requests at the bottom per call. The name is sim's cascade policy
	// of the same rule.
	CascadeNaive = "retry-every-tier"
	// CascadeLayer is the layer rule (retry.NestedOneLayer, the default):
	// the inner tiers make one attempt while their caller retries.
	CascadeLayer = "layer-rule"
	// CascadeMarker is the layer rule, the bottom shedding with
	// layer.Overload (the marker every tier passes up) and a
	// budget.TenPercent retry budget in every tier's client.
	CascadeMarker = "layer-rule+marker+budget"
)

// CascadePolicy is one way every client of the chain retries.
type CascadePolicy struct {
	// Name labels the row.
	Name string
	// Nested is the layer rule of every client (the zero value:
	// retry.NestedOneLayer).
	Nested retry.NestedRule
	// Marker makes the bottom tier answer its failures with
	// layer.Overload ("overloaded; don't retry") instead of a plain 503.
	Marker bool
	// Budget gives each tier's client its own budget.TenPercent retry
	// budget, shared by that tier's requests; the callers share one too,
	// or own one each under CascadeOptions.Scope PerClient.
	Budget bool
}

// CascadePolicies returns the three policies of issue #20: retries at
// every tier, the layer rule, and the layer rule with the overload
// marker and a budget.
func CascadePolicies() []CascadePolicy {
	return []CascadePolicy{
		{Name: CascadeNaive, Nested: retry.NestedIgnore},
		{Name: CascadeLayer, Nested: retry.NestedOneLayer},
		{Name: CascadeMarker, Nested: retry.NestedOneLayer, Marker: true, Budget: true},
	}
}

// Defaults and bounds of CascadeOptions.
const (
	DefaultCascadeClients     = 20
	DefaultCascadeDuration    = 3 * time.Second
	DefaultCascadeAttempts    = 4
	DefaultCascadeInterval    = 100 * time.Millisecond
	DefaultCascadeMaxCalls    = 5000
	DefaultCascadeCallTimeout = 5 * time.Second
	// MaxCascadeAttempts bounds CascadeOptions.Attempts (the bottom's load
	// grows as its cube).
	MaxCascadeAttempts = 6
)

// CascadeOptions configure RunCascade. Zero fields take the defaults.
type CascadeOptions struct {
	// Clients is the number of callers (default 20, at most
	// DefaultMaxClients). Each starts a call to tier 1 every Interval
	// (default 100ms), from a phase drawn from Seed, until Duration,
	// whether or not its earlier calls have ended (open loop: every
	// policy meets the same calls, so success compares across policies;
	// a closed loop lets a fleet that fails fast start more calls).
	Clients  int
	Interval time.Duration
	// Seed draws the callers' phases (sim.Arrival.Stream): the same seed
	// gives the same schedule.
	Seed uint64
	// Scope says whether the callers share one retry.Policy, and so one
	// budget under CascadePolicy.Budget (Shared, the default), or own one
	// each (PerClient). The tiers' budgets are per tier either way.
	Scope Scope
	// Sequential runs the policies one after another instead of at the
	// same time.
	Sequential bool
	// Duration is how long callers start calls (default 3s, at most
	// MaxDuration).
	Duration time.Duration
	// FailStart and FailEnd bound the window in which the bottom tier
	// fails every request (default: the middle third of Duration).
	FailStart, FailEnd time.Duration
	// WholeCalls makes the bottom fail every request of a call started in
	// the window, whenever the request arrives, instead of the requests
	// arriving in the window: a call meets the outage on every attempt, so
	// the amplification measured is the chain's alone, not how fast a
	// (shared, loaded) machine runs the calls that straddle the window's
	// end.
	WholeCalls bool
	// Attempts is every client's MaxAttempts (default 4, at most
	// MaxCascadeAttempts). Retries wait Backoff (default 0: at once).
	Attempts int
	// Backoff is the wait before every retry (default 0).
	Backoff time.Duration
	// MaxCalls bounds the calls of one policy's fleet (default 5000): the
	// first MaxCalls of the schedule.
	MaxCalls int
	// CallTimeout is a caller's deadline for one call (default 5s).
	CallTimeout time.Duration
	// Policies are compared (default CascadePolicies()), each over its
	// own three servers, at the same time unless Sequential.
	Policies []CascadePolicy
}

func (o *CascadeOptions) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: cascade: "+format, append([]any{ErrScenario}, args...)...)
	}
	if o.Clients == 0 {
		o.Clients = DefaultCascadeClients
	}
	if o.Duration == 0 {
		o.Duration = DefaultCascadeDuration
	}
	if o.FailStart == 0 && o.FailEnd == 0 {
		o.FailStart, o.FailEnd = o.Duration/3, 2*o.Duration/3
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultCascadeAttempts
	}
	if o.Interval == 0 {
		o.Interval = DefaultCascadeInterval
	}
	if o.MaxCalls == 0 {
		o.MaxCalls = DefaultCascadeMaxCalls
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCascadeCallTimeout
	}
	if o.Policies == nil {
		o.Policies = CascadePolicies()
	}
	switch {
	case o.Clients < 0 || o.Clients > DefaultMaxClients:
		return bad("clients must be in [1, %d], got %d", DefaultMaxClients, o.Clients)
	case o.Duration < 0 || o.Duration > MaxDuration:
		return bad("duration must be in (0, %s], got %s", MaxDuration, o.Duration)
	case o.FailStart < 0 || o.FailEnd <= o.FailStart || o.FailEnd > o.Duration:
		return bad("failure window [%s, %s) must be non-empty and within the duration", o.FailStart, o.FailEnd)
	case o.Attempts < 1 || o.Attempts > MaxCascadeAttempts:
		return bad("attempts must be in [1, %d], got %d", MaxCascadeAttempts, o.Attempts)
	case o.Backoff < 0 || o.Interval < 0:
		return bad("backoff and interval must not be negative")
	case o.Scope > PerClient:
		return bad("unknown scope %d", o.Scope)
	case o.MaxCalls < 0 || o.MaxCalls > MaxCalls:
		return bad("max calls must be in [1, %d], got %d", MaxCalls, o.MaxCalls)
	case o.CallTimeout < 0 || o.CallTimeout > MaxDuration:
		return bad("call timeout must be in (0, %s], got %s", MaxDuration, o.CallTimeout)
	case len(o.Policies) == 0:
		return bad("no policy to run")
	}
	if o.Interval > 0 && float64(o.Clients)/o.Interval.Seconds() > MaxCallRate {
		return bad("the callers would start %.0f calls per second, more than %d", float64(o.Clients)/o.Interval.Seconds(), MaxCallRate)
	}
	return nil
}

// CascadeReport is what RunCascade measured, one row per policy.
// Encoded as JSON (MarshalJSON) it uses sim's conventions: snake_case
// keys and durations in seconds.
type CascadeReport struct {
	// Options are the options as run, defaults filled in.
	Options CascadeOptions
	// Rows are in the order of Options.Policies.
	Rows []CascadeRow
}

// CascadeRow is one policy's run.
type CascadeRow struct {
	// Policy is the policy run.
	Policy CascadePolicy
	// Calls is the number of calls the callers made (the schedule's,
	// the same for every policy unless the run was cut short);
	// FaultCalls those scheduled inside the failure window.
	Calls, FaultCalls int
	// Requests counts the requests that reached tier 1, tier 2 and the
	// bottom, on the wire (counted by each server as it receives them);
	// FaultRequests those made for calls started in the failure window.
	Requests, FaultRequests [3]int64
	// Amplification is FaultRequests per fault call at each tier: the
	// requests one client call turns into while the bottom fails.
	Amplification [3]float64
	// Success is the share of the scheduled calls that succeeded;
	// FaultSuccess the share of the fault calls. The schedule is open
	// loop, the same calls for every policy, so the shares compare
	// across policies.
	Success, FaultSuccess float64
	// P50 and P99 are end-to-end latency percentiles of all calls, and
	// FaultP99 that of the fault calls.
	P50, P99, FaultP99 time.Duration
	// StartLagMax is how late the callers started a call against their
	// schedule at worst: a check on the harness.
	StartLagMax time.Duration
}

// Row returns the row of the policy called name.
func (r *CascadeReport) Row(name string) (CascadeRow, bool) {
	for _, row := range r.Rows {
		if row.Policy.Name == name {
			return row, true
		}
	}
	return CascadeRow{}, false
}

// CascadeTitle is the title of RunCascade's table.
const CascadeTitle = "Live cascade: caller → tier 1 → tier 2 → bottom"

// Table renders the report as a sim.Table (its WriteTo prints it).
func (r *CascadeReport) Table() sim.Table {
	o := r.Options
	t := sim.Table{
		Title: fmt.Sprintf("%s, %d callers every %s (open loop), %d attempts per client, bottom failing %s–%s",
			CascadeTitle, o.Clients, roundDur(o.Interval), o.Attempts, roundDur(o.FailStart), roundDur(o.FailEnd)),
		Header: []string{"policy", "calls", "tier 1 ×", "tier 2 ×", "bottom ×", "success", "success in fault", "p50", "p99", "p99 in fault", "lag"},
		Notes: []string{
			"×: requests reaching the tier (counted on the wire) per client call started while the bottom fails",
			"success: the share of the scheduled calls that succeeded; the schedule is open loop (every caller starts a call every interval whatever its earlier calls do), the same calls for every policy, so success compares across rows",
			CascadeNaive + ": retry.NestedIgnore at every tier; " + CascadeLayer + ": retry.NestedOneLayer; " + CascadeMarker + ": the bottom sheds with layer.Overload, passed up by every tier, budget.TenPercent per tier",
			"lag: how late the callers started a call against their schedule at worst (a check on the harness)",
		},
	}
	d := func(v time.Duration) string { return v.Round(10 * time.Microsecond).String() }
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []string{
			row.Policy.Name,
			fmt.Sprint(row.Calls),
			fmt.Sprintf("%.2f", row.Amplification[0]),
			fmt.Sprintf("%.2f", row.Amplification[1]),
			fmt.Sprintf("%.2f", row.Amplification[2]),
			fmt.Sprintf("%.1f%%", 100*row.Success),
			fmt.Sprintf("%.1f%%", 100*row.FaultSuccess),
			d(row.P50), d(row.P99), d(row.FaultP99), d(row.StartLagMax),
		})
	}
	return t
}

// WriteTo prints the report's table to w.
func (r *CascadeReport) WriteTo(w io.Writer) (int64, error) { return r.Table().WriteTo(w) }

// MarshalJSON encodes the report as sim's reports are: snake_case keys,
// durations in seconds, and "scenario": "cascade".
func (r *CascadeReport) MarshalJSON() ([]byte, error) {
	o := r.Options
	type policy struct {
		Name   string `json:"name"`
		Nested string `json:"nested"`
		Marker bool   `json:"marker,omitempty"`
		Budget bool   `json:"budget,omitempty"`
	}
	type row struct {
		Policy        policy     `json:"policy"`
		Calls         int        `json:"calls"`
		FaultCalls    int        `json:"fault_calls"`
		Requests      [3]int64   `json:"requests"`
		FaultRequests [3]int64   `json:"fault_requests"`
		Amplification [3]float64 `json:"amplification"`
		Success       float64    `json:"success"`
		FaultSuccess  float64    `json:"fault_success"`
		P50S          float64    `json:"p50_s"`
		P99S          float64    `json:"p99_s"`
		FaultP99S     float64    `json:"fault_p99_s"`
		StartLagMaxS  float64    `json:"start_lag_max_s"`
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
		WholeCalls   bool    `json:"whole_calls,omitempty"`
		Attempts     int     `json:"attempts"`
		BackoffS     float64 `json:"backoff_s"`
		MaxCalls     int     `json:"max_calls"`
		CallTimeoutS float64 `json:"call_timeout_s"`
		Scope        string  `json:"scope"`
		Sequential   bool    `json:"sequential"`
		Rows         []row   `json:"rows"`
	}{
		Scenario: CascadeScenario, Title: r.Table().Title, Seed: o.Seed, Clients: o.Clients,
		IntervalS: o.Interval.Seconds(), DurationS: o.Duration.Seconds(),
		FaultStartS: o.FailStart.Seconds(), FaultEndS: o.FailEnd.Seconds(), WholeCalls: o.WholeCalls,
		Attempts: o.Attempts, BackoffS: o.Backoff.Seconds(), MaxCalls: o.MaxCalls, CallTimeoutS: o.CallTimeout.Seconds(),
		Scope: o.Scope.String(), Sequential: o.Sequential, Rows: []row{},
	}
	for _, rw := range r.Rows {
		out.Rows = append(out.Rows, row{
			Policy: policy{Name: rw.Policy.Name, Nested: nestedName(rw.Policy.Nested), Marker: rw.Policy.Marker, Budget: rw.Policy.Budget},
			Calls:  rw.Calls, FaultCalls: rw.FaultCalls, Requests: rw.Requests, FaultRequests: rw.FaultRequests,
			Amplification: rw.Amplification, Success: rw.Success, FaultSuccess: rw.FaultSuccess,
			P50S: rw.P50.Seconds(), P99S: rw.P99.Seconds(), FaultP99S: rw.FaultP99.Seconds(), StartLagMaxS: rw.StartLagMax.Seconds(),
		})
	}
	return json.Marshal(out)
}

// nestedName is the policy file's name of a layer rule.
func nestedName(n retry.NestedRule) string {
	switch n {
	case retry.NestedOneLayer:
		return "one_layer"
	case retry.NestedIgnore:
		return "ignore"
	case retry.NestedBudget:
		return "budget"
	}
	return fmt.Sprintf("rule(%d)", int(n))
}

// CascadeScenario is the name of RunCascade's run on the command line
// ("stormsim live cascade") and in its JSON: sim's cascade scenario (the
// same three tiers and contenders) in its total case, on real loopback
// servers with a timeline of its own.
const CascadeScenario = "cascade"

// Sim returns the report as a sim.Report for the stormsim command's
// printers and HTML page: its table, the policies' legend, and a chart of
// the requests per call at each tier (log scale when the policies differ
// by 10× or more, so that no line is flattened).
func (r *CascadeReport) Sim() *sim.Report {
	t := r.Table()
	o := r.Options
	rep := &sim.Report{
		Scenario: "live:" + CascadeScenario, ModelVersion: sim.ModelVersion, Title: t.Title, Seed: o.Seed, Trials: 1,
		Description: "sim's cascade (caller → tier 1 → tier 2 → bottom, every tier behind layer.Middleware and calling the next through httpretry) in its total case: the bottom answers every request of the failure window with 503, or layer.Overload under the marker. Measured on real loopback servers.",
		Tables:      []sim.Table{t},
	}
	pl := sim.Plot{Title: "Requests per call started in the fault, by tier", XLabel: "tier (1: tier 1, 2: tier 2, 3: bottom)", YLabel: "requests per call"}
	for _, row := range r.Rows {
		p := row.Policy
		doc := "retry.NestedIgnore at every tier: every hop retries by its own count"
		if p.Nested == retry.NestedOneLayer {
			doc = "retry.NestedOneLayer at every tier: a hop serving a caller that retries makes one attempt"
		}
		if p.Marker {
			doc += "; the bottom sheds with layer.Overload, passed up by every tier and retried by none"
		}
		if p.Budget {
			doc += "; budget.TenPercent per tier (" + o.Scope.String() + " among the callers)"
		}
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{p.Name, doc})
		pl.Lines = append(pl.Lines, sim.Line{Name: row.Policy.Name, X: []float64{1, 2, 3}, Y: row.Amplification[:]})
	}
	rep.Plots = []sim.Plot{pl}
	return rep
}

// cascadeFaultHeader marks the requests of a call started in the failure
// window; every tier passes it on.
const cascadeFaultHeader = "Live-Cascade-Fault"

// RunCascade runs issue #20's cascade live: for each policy, three real
// HTTP servers on 127.0.0.1 (tier 1 → tier 2 → bottom), each behind
// layer.Middleware, each middle tier calling the next through httpretry
// (as a layer.HandlerFunc that returns a downstream's overload marker, so
// that it travels up); a fleet of callers calling tier 1 through
// httpretry; the bottom answering 503 (or layer.Overload under
// CascadePolicy.Marker) inside the failure window and 200 outside it.
// Every server counts the requests it receives. Policies run at the same
// time. RunCascade returns when every call has ended and every server is
// shut down.
func RunCascade(ctx context.Context, opts CascadeOptions) (*CascadeReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	sched := openSchedule(opts.Clients, opts.Interval, opts.Duration, opts.Seed, opts.MaxCalls)
	start := time.Now()
	rows, err := runPolicies(opts.Policies, opts.Sequential, func(p CascadePolicy) (CascadeRow, error) {
		if opts.Sequential {
			return runCascadePolicy(ctx, &opts, p, time.Now(), sched)
		}
		return runCascadePolicy(ctx, &opts, p, start, sched)
	})
	if err != nil {
		return nil, err
	}
	return &CascadeReport{Options: opts, Rows: rows}, nil
}

// cascadeTier is one server of the chain, counting the requests it
// receives and those of calls started in the failure window.
type cascadeTier struct {
	*loopback
	hits, fault atomic.Int64
}

func newCascadeTier(h http.Handler) (*cascadeTier, error) {
	t := &cascadeTier{}
	l, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.hits.Add(1)
		if r.Header.Get(cascadeFaultHeader) != "" {
			t.fault.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	if err != nil {
		return nil, err
	}
	t.loopback = l
	return t, nil
}

// cascadeTransport is a fresh loopback transport with room for the
// fleet's connections.
func cascadeTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

func cascadeRetryPolicy(o *CascadeOptions, p CascadePolicy) *retry.Policy {
	wait := o.Backoff
	rp := &retry.Policy{
		Operation:   "cascade",
		MaxAttempts: o.Attempts,
		Backoff:     backoff.Func(func(int, time.Duration) time.Duration { return wait }),
		Nested:      p.Nested,
	}
	if p.Budget {
		rp.Budget = budget.NewRatio(budget.TenPercent())
	}
	return rp
}

// cascadeRelay is a middle tier's handler: one request to next through
// client per inbound request, answering with next's status, and returning
// a downstream's overload marker for layer.Middleware to pass up.
func cascadeRelay(client *http.Client, next string) layer.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if err != nil {
			return err
		}
		if v := r.Header.Get(cascadeFaultHeader); v != "" {
			req.Header.Set(cascadeFaultHeader, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok && errors.Is(o.Err, retry.ErrOverloaded) {
			return o.Err
		}
		w.WriteHeader(resp.StatusCode)
		return nil
	}
}

type cascadeCall struct {
	fault bool
	ok    bool
	d     time.Duration
}

func runCascadePolicy(ctx context.Context, o *CascadeOptions, p CascadePolicy, start time.Time, sched []openCall) (CascadeRow, error) {
	row := CascadeRow{Policy: p}
	failing := func() bool {
		at := time.Since(start)
		return at >= o.FailStart && at < o.FailEnd
	}
	bottom, err := newCascadeTier(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fails := failing()
		if o.WholeCalls {
			fails = r.Header.Get(cascadeFaultHeader) != ""
		}
		switch {
		case !fails:
			w.WriteHeader(http.StatusOK)
		case p.Marker:
			layer.Overload(w, time.Second)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	if err != nil {
		return row, err
	}
	defer bottom.close()
	conns := 2 * o.Clients
	tr2 := cascadeTransport(conns)
	defer tr2.CloseIdleConnections()
	t2, err := newCascadeTier(layer.Middleware(cascadeRelay(&http.Client{Transport: httpretry.New(tr2, cascadeRetryPolicy(o, p))}, bottom.url)))
	if err != nil {
		return row, err
	}
	defer t2.close()
	tr1 := cascadeTransport(conns)
	defer tr1.CloseIdleConnections()
	t1, err := newCascadeTier(layer.Middleware(cascadeRelay(&http.Client{Transport: httpretry.New(tr1, cascadeRetryPolicy(o, p))}, t2.url)))
	if err != nil {
		return row, err
	}
	defer t1.close()
	tr0 := cascadeTransport(conns)
	defer tr0.CloseIdleConnections()
	callers := []*http.Client{{Transport: httpretry.New(tr0, cascadeRetryPolicy(o, p))}}
	if o.Scope == PerClient {
		for range o.Clients - 1 {
			callers = append(callers, &http.Client{Transport: httpretry.New(tr0, cascadeRetryPolicy(o, p))})
		}
	}

	var (
		mu    sync.Mutex
		calls []cascadeCall
	)
	row.StartLagMax = runOpenLoop(ctx, start, sched, func(sc openCall) {
		fault := sc.At >= o.FailStart && sc.At < o.FailEnd
		c := cascadeOne(ctx, o, callers[min(sc.Client, len(callers)-1)], t1.url, fault)
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	})
	if err := ctx.Err(); err != nil {
		return row, err
	}

	var all, fault []time.Duration
	var ok, faultOK int
	for _, c := range calls {
		all = append(all, c.d)
		if c.ok {
			ok++
		}
		if c.fault {
			fault = append(fault, c.d)
			if c.ok {
				faultOK++
			}
		}
	}
	row.Calls, row.FaultCalls = len(all), len(fault)
	for i, t := range []*cascadeTier{t1, t2, bottom} {
		row.Requests[i] = t.hits.Load()
		row.FaultRequests[i] = t.fault.Load()
		if row.FaultCalls > 0 {
			row.Amplification[i] = float64(row.FaultRequests[i]) / float64(row.FaultCalls)
		}
	}
	if row.Calls > 0 {
		row.Success = float64(ok) / float64(row.Calls)
	}
	if row.FaultCalls > 0 {
		row.FaultSuccess = float64(faultOK) / float64(row.FaultCalls)
	}
	row.P50, row.P99 = percentile(all, 0.50), percentile(all, 0.99)
	row.FaultP99 = percentile(fault, 0.99)
	return row, nil
}

// cascadeOne makes one caller call.
func cascadeOne(ctx context.Context, o *CascadeOptions, caller *http.Client, url string, fault bool) cascadeCall {
	ctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	c := cascadeCall{fault: fault}
	began := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c
	}
	if fault {
		req.Header.Set(cascadeFaultHeader, "1")
	}
	resp, err := caller.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.ok = resp.StatusCode == http.StatusOK
	}
	c.d = time.Since(began)
	return c
}

// percentile returns the q-quantile of ds (nearest rank), 0 when empty. It
// sorts ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}
