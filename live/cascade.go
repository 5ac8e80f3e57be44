package live

import (
	"context"
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
	// requests at the bottom per call.
	CascadeNaive = "naive"
	// CascadeLayer is the layer rule (retry.NestedOneLayer, the default):
	// the inner tiers make one attempt while their caller retries.
	CascadeLayer = "layer-rule"
	// CascadeMarker is the layer rule, the bottom shedding with
	// layer.Overload (the marker every tier passes up) and a
	// budget.TenPercent retry budget in every tier's client.
	CascadeMarker = "layer+marker+budget"
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
	// Budget gives each tier's client (and the callers' fleet) its own
	// budget.TenPercent retry budget, shared by that tier's requests.
	Budget bool
}

// CascadePolicies returns the three policies of issue #20: naive retries
// at every tier, the layer rule, and the layer rule with the overload
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
	DefaultCascadeThink       = 10 * time.Millisecond
	DefaultCascadeMaxCalls    = 5000
	DefaultCascadeCallTimeout = 5 * time.Second
	// MaxCascadeAttempts bounds CascadeOptions.Attempts (the bottom's load
	// grows as its cube).
	MaxCascadeAttempts = 6
)

// CascadeOptions configure RunCascade. Zero fields take the defaults.
type CascadeOptions struct {
	// Clients is the number of caller goroutines (default 20, at most
	// DefaultMaxClients). Each calls tier 1 in a closed loop: a call, a
	// pause of Think, the next call, until Duration.
	Clients int
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
	// Think is a caller's pause between calls (default 10ms).
	Think time.Duration
	// MaxCalls bounds the calls of one policy's fleet (default 5000).
	MaxCalls int
	// CallTimeout is a caller's deadline for one call (default 5s).
	CallTimeout time.Duration
	// Policies are compared (default CascadePolicies()), at the same time,
	// each over its own three servers.
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
	if o.Think == 0 {
		o.Think = DefaultCascadeThink
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
	case o.Backoff < 0 || o.Think < 0:
		return bad("backoff and think time must not be negative")
	case o.MaxCalls < 0 || o.MaxCalls > MaxCalls:
		return bad("max calls must be in [1, %d], got %d", MaxCalls, o.MaxCalls)
	case o.CallTimeout < 0 || o.CallTimeout > MaxDuration:
		return bad("call timeout must be in (0, %s], got %s", MaxDuration, o.CallTimeout)
	case len(o.Policies) == 0:
		return bad("no policy to run")
	}
	return nil
}

// CascadeReport is what RunCascade measured, one row per policy.
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
	// Calls is the number of calls the callers made; FaultCalls those
	// started inside the failure window.
	Calls, FaultCalls int
	// Requests counts the requests that reached tier 1, tier 2 and the
	// bottom, on the wire (counted by each server as it receives them);
	// FaultRequests those made for calls started in the failure window.
	Requests, FaultRequests [3]int64
	// Amplification is FaultRequests per fault call at each tier: the
	// requests one client call turns into while the bottom fails.
	Amplification [3]float64
	// Success is the share of all calls that succeeded; FaultSuccess the
	// share of the fault calls.
	Success, FaultSuccess float64
	// P50 and P99 are end-to-end latency percentiles of all calls, and
	// FaultP99 that of the fault calls.
	P50, P99, FaultP99 time.Duration
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

// Table renders the report as a sim.Table (its WriteTo prints it).
func (r *CascadeReport) Table() sim.Table {
	o := r.Options
	t := sim.Table{
		Title: fmt.Sprintf("Live cascade: caller → tier 1 → tier 2 → bottom, %d callers, %d attempts per client, bottom failing %s–%s",
			o.Clients, o.Attempts, o.FailStart, o.FailEnd),
		Header: []string{"policy", "calls", "tier 1 ×", "tier 2 ×", "bottom ×", "success", "success in fault", "p50", "p99", "p99 in fault"},
		Notes: []string{
			"×: requests reaching the tier (counted on the wire) per client call started while the bottom fails",
			"naive: retry.NestedIgnore at every tier; layer-rule: retry.NestedOneLayer; layer+marker+budget: the bottom sheds with layer.Overload, passed up by every tier, budget.TenPercent per tier",
		},
	}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []string{
			row.Policy.Name,
			fmt.Sprint(row.Calls),
			fmt.Sprintf("%.2f", row.Amplification[0]),
			fmt.Sprintf("%.2f", row.Amplification[1]),
			fmt.Sprintf("%.2f", row.Amplification[2]),
			fmt.Sprintf("%.1f%%", 100*row.Success),
			fmt.Sprintf("%.1f%%", 100*row.FaultSuccess),
			row.P50.Round(10 * time.Microsecond).String(),
			row.P99.Round(10 * time.Microsecond).String(),
			row.FaultP99.Round(10 * time.Microsecond).String(),
		})
	}
	return t
}

// WriteTo prints the report's table to w.
func (r *CascadeReport) WriteTo(w io.Writer) (int64, error) { return r.Table().WriteTo(w) }

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
	start := time.Now()
	rows, err := runPolicies(opts.Policies, func(p CascadePolicy) (CascadeRow, error) {
		return runCascadePolicy(ctx, &opts, p, start)
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

func runCascadePolicy(ctx context.Context, o *CascadeOptions, p CascadePolicy, start time.Time) (CascadeRow, error) {
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
	caller := &http.Client{Transport: httpretry.New(tr0, cascadeRetryPolicy(o, p))}

	var (
		mu    sync.Mutex
		calls []cascadeCall
		left  atomic.Int64
		wg    sync.WaitGroup
	)
	left.Store(int64(o.MaxCalls))
	for range o.Clients {
		wg.Go(func() {
			pause := time.NewTimer(0)
			defer pause.Stop()
			for time.Since(start) < o.Duration && ctx.Err() == nil && left.Add(-1) >= 0 {
				c := cascadeOne(ctx, o, caller, t1.url, failing())
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				pause.Reset(o.Think)
				select {
				case <-pause.C:
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
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
