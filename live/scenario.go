package live

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// ErrScenario is wrapped by the errors about scenarios and options that
// Validate and Run return.
var ErrScenario = errors.New("live: invalid scenario")

// Defaults for zero Scenario fields.
const (
	// DefaultCallTimeout is the caller's deadline for one call.
	DefaultCallTimeout = 10 * time.Second
	// DrainMargin is added to the time calls may still take after
	// Duration when Drain is zero (see Scenario.Drain).
	DrainMargin = time.Second
)

// Limits on what a scenario may ask for, so that every run is bounded.
const (
	// MaxClientsLimit is the most client goroutines Options.MaxClients may
	// allow.
	MaxClientsLimit = 10_000
	// DefaultMaxClients is the most client goroutines a run starts unless
	// Options.MaxClients says otherwise.
	DefaultMaxClients = 1000
	// MaxDuration bounds Duration and Drain.
	MaxDuration = 10 * time.Minute
	// MaxCallRate bounds the calls per second the whole fleet starts.
	MaxCallRate = 20_000
	// MaxReissue bounds Scenario.Reissue.
	MaxReissue = 5
)

// Scenario is a live experiment: a fleet of client goroutines calling one
// real HTTP server on 127.0.0.1 through httpretry, under a fault schedule,
// once for each policy compared. It describes the same kind of system as a
// one-tier sim.Model, in real time.
//
// A Scenario is a plain value: copy one from Lookup and change its fields
// to make a variant.
type Scenario struct {
	// Name is what the command line calls it ("gateway-restart").
	Name string
	// Title is a one-line summary; Doc describes the setup in full.
	Title, Doc string
	// TitleFor, if set, builds the report's title from the scenario as
	// run (after Options changed its clients or duration).
	TitleFor func(sc *Scenario) string

	// Clients is the number of client goroutines. Each has its own arrival
	// stream, drawn from the run's seed, so that every policy meets the
	// same calls.
	Clients int
	// Arrival is each client's call pattern: sim.Periodic (one call every
	// Interval, from a random phase) or sim.Poisson (Rate calls per
	// second). A call starts on schedule even when the client's previous
	// call is still running.
	Arrival sim.Arrival
	// Duration is how long clients start calls.
	Duration time.Duration
	// Drain bounds how long the run continues after Duration so that calls
	// in flight can end; calls still open then are cancelled and count as
	// failed. The run ends earlier when every call has ended.
	// 0: the longest a call can take ((1+Reissue)·CallTimeout plus the
	// reissue delays) plus DrainMargin.
	Drain time.Duration
	// Warmup is excluded from the baseline: the baseline window is
	// [Warmup, first fault start), as in sim.Model.
	Warmup time.Duration
	// CallTimeout is the caller's deadline for one call, all attempts and
	// waits included (a context deadline). 0: DefaultCallTimeout.
	CallTimeout time.Duration

	// Reissue is how many times a caller issues a failed call again, as a
	// new call with the same Idempotency-Key, while clients still start
	// calls (before Duration): the retries of the layer above the client
	// (a user pressing reload, an upstream service's own retry). They show
	// up as rising entry traffic. 0: never.
	Reissue int
	// ReissueDelay is the wait before a reissue.
	ReissueDelay time.Duration

	// Reports, if set, makes each client an agent that keeps its reports
	// in a real queue.Queue (Capacity, MaxBatch, DropOldest, one worker,
	// no linger) under its policy: every arrival offers a report, every
	// delivery of a batch is a call, and a delivery that gives up puts its
	// reports back instead of losing them (see sim.ReportQueue, which the
	// simulator follows). Reissue does not apply. nil: every arrival is a
	// call.
	Reports *sim.ReportQueue

	// Server is the downstream every client calls.
	Server Server
	// Faults change the server during windows of time measured from the
	// start of the run. Supported kinds: sim.FaultUnavailable (every
	// request answered 503 at once), sim.FaultHang (no answer until the
	// caller gives up), sim.FaultLoss (a share Prob of requests get no
	// answer, without holding a worker), sim.FaultReplyLoss (a share Prob
	// of answers are lost after the work: the worker is freed, the caller
	// hears nothing until it gives up), sim.FaultLatency (Extra waited
	// on the request's way in and again on the answer's way out, outside
	// the workers: a slow network, as sim adds it to each leg),
	// sim.FaultSlow (Extra added to the service time of requests starting
	// service in the window: the worker is held), sim.FaultCapacity (only
	// Factor of Limit.Concurrency serve, rounded as sim.CapacityWorkers
	// rounds) and sim.FaultErrors (a share Prob of served requests answer
	// 500). Each kind means what it means in sim. Tier must be 0.
	Faults []sim.Fault

	// Params configure the standard policies (see sim.StandardPolicy).
	Params sim.PolicyParams
	// Policies is the default set compared: standard names, aliases
	// ("naive" for "immediate") or names of Custom policies.
	// nil: DefaultPolicies().
	Policies []string
	// Custom are the scenario's own policies. A custom policy shadows a
	// standard policy of the same name.
	Custom []sim.Policy
}

// Server is the live downstream: a faultinject middleware (capacity limit,
// outage windows) in front of a handler that holds each request for a
// service time, like a worker of a sim.Tier.
type Server struct {
	// Limit caps the requests served at once and queued, as
	// faultinject.Limit does: Concurrency workers (0: unlimited), a FIFO
	// queue of Queue (0: none wait), refusals answered 503.
	Limit faultinject.Limit
	// Service is the time a request holds its worker.
	Service sim.Dist
	// FailProb is the probability that a served request answers 500
	// (retried, like sim.ErrServer) at the end of its service.
	FailProb float64
	// Timeout is the attempt timeout of policies that set none, like
	// sim.Tier.Timeout. 0: none.
	Timeout time.Duration
	// IgnoreCancel makes the handler finish its service even after its
	// caller gave up (cancellation not propagated), so that the wasted work
	// shows. By default the handler stops as soon as its request's context
	// ends.
	IgnoreCancel bool
}

// callTimeout returns the caller's deadline.
func (sc *Scenario) callTimeout() time.Duration {
	if sc.CallTimeout == 0 {
		return DefaultCallTimeout
	}
	return sc.CallTimeout
}

// drain returns the drain bound.
func (sc *Scenario) drain() time.Duration {
	if sc.Drain > 0 {
		return sc.Drain
	}
	n := time.Duration(1 + sc.Reissue)
	return n*sc.callTimeout() + time.Duration(sc.Reissue)*sc.ReissueDelay + DrainMargin
}

// horizon is the longest a run of the scenario lasts.
func (sc *Scenario) horizon() time.Duration { return sc.Duration + sc.drain() }

// CapacityPerS returns the server's nominal capacity in requests per
// second (workers ÷ mean service time), or 0 when it is unbounded.
func (sc *Scenario) CapacityPerS() float64 {
	mean := sc.Server.Service.Mean()
	if sc.Server.Limit.Concurrency <= 0 || mean <= 0 {
		return 0
	}
	return float64(sc.Server.Limit.Concurrency) / mean.Seconds()
}

// callRate returns the calls per second the fleet starts.
func (sc *Scenario) callRate() float64 {
	per := sc.Arrival.Rate
	if sc.Arrival.Kind == sim.Periodic {
		per = 0
		if sc.Arrival.Interval > 0 {
			per = float64(time.Second) / float64(sc.Arrival.Interval)
		}
	}
	return per * float64(sc.Clients)
}

// Validate reports whether the scenario can be run with at most maxClients
// clients (0: DefaultMaxClients), as an error wrapping ErrScenario.
func (sc *Scenario) Validate(maxClients int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrScenario, sc.Name}, args...)...)
	}
	if maxClients <= 0 {
		maxClients = DefaultMaxClients
	}
	if maxClients > MaxClientsLimit {
		return bad("client limit %d is above %d", maxClients, MaxClientsLimit)
	}
	switch {
	case sc.Clients <= 0 || sc.Clients > maxClients:
		return bad("clients must be in [1, %d], got %d", maxClients, sc.Clients)
	case sc.Duration <= 0 || sc.Duration > MaxDuration:
		return bad("duration must be in (0, %s], got %s", MaxDuration, sc.Duration)
	case sc.Drain < 0 || sc.Drain > MaxDuration:
		return bad("drain must be in [0, %s], got %s", MaxDuration, sc.Drain)
	case sc.Warmup < 0:
		return bad("warmup must not be negative")
	case sc.CallTimeout < 0 || sc.CallTimeout > MaxDuration:
		return bad("call timeout must be in [0, %s], got %s", MaxDuration, sc.CallTimeout)
	case sc.Reissue < 0 || sc.Reissue > MaxReissue:
		return bad("reissue must be in [0, %d], got %d", MaxReissue, sc.Reissue)
	case sc.ReissueDelay < 0:
		return bad("reissue delay must not be negative")
	case sc.drain() > MaxDuration:
		return bad("drain %s is above %s", sc.drain(), MaxDuration)
	case sc.Reports != nil && (sc.Reports.Capacity < 1 || sc.Reports.Capacity > 1<<16 || sc.Reports.MaxBatch < 0 || sc.Reports.MaxBatch > sc.Reports.Capacity):
		return bad("report queue: capacity must be in [1, %d] and max batch in [0, capacity]", 1<<16)
	case sc.Reports != nil && sc.Reissue > 0:
		return bad("reissue does not apply to agents with a report queue")
	}
	switch sc.Arrival.Kind {
	case sim.Periodic:
		if sc.Arrival.Interval <= 0 {
			return bad("periodic interval must be positive")
		}
	case sim.Poisson:
		if !(sc.Arrival.Rate > 0) || math.IsInf(sc.Arrival.Rate, 0) {
			return bad("poisson rate must be positive, got %g", sc.Arrival.Rate)
		}
	default:
		return bad("unknown arrival kind %d", sc.Arrival.Kind)
	}
	if r := sc.callRate(); r > MaxCallRate {
		return bad("the clients start %.0f calls per second, more than %d", r, MaxCallRate)
	} else if n := r * sc.Duration.Seconds(); n > MaxCalls {
		return bad("the clients would start about %.0f calls, more than %d", n, MaxCalls)
	}
	s := &sc.Server
	if err := (faultinject.Rules{Limit: s.Limit}).Validate(); err != nil {
		return bad("server limit: %w", err)
	}
	if !(s.FailProb >= 0 && s.FailProb <= 1) {
		return bad("server fail probability must be in [0, 1]")
	}
	if s.Timeout < 0 {
		return bad("server timeout must not be negative")
	}
	if err := checkDist("service", s.Service); err != nil {
		return bad("%w", err)
	}
	for i, f := range sc.Faults {
		if err := checkFault(f, s.Limit.Concurrency); err != nil {
			return bad("fault %d: %w", i, err)
		}
	}
	return nil
}

func checkDist(name string, d sim.Dist) error {
	if d.A < 0 || d.B < 0 || math.IsNaN(d.Sigma) || d.Sigma < 0 {
		return fmt.Errorf("%s distribution %v has a negative parameter", name, d)
	}
	if m := d.Mean(); m > MaxDuration {
		return fmt.Errorf("%s distribution %v has a mean above %s", name, d, MaxDuration)
	}
	return nil
}

func checkFault(f sim.Fault, workers int) error {
	switch {
	case f.Tier != 0:
		return fmt.Errorf("tier %d: a live run has one server, tier 0", f.Tier)
	case f.Start < 0 || f.End <= f.Start:
		return fmt.Errorf("window [%s, %s) is empty or negative", f.Start, f.End)
	case f.End > MaxDuration:
		return fmt.Errorf("window end %s is beyond %s", f.End, MaxDuration)
	case !(f.Prob >= 0 && f.Prob <= 1):
		return fmt.Errorf("probability %v is outside [0, 1]", f.Prob)
	}
	switch f.Kind {
	case sim.FaultUnavailable, sim.FaultHang, sim.FaultLoss, sim.FaultReplyLoss, sim.FaultErrors:
	case sim.FaultLatency, sim.FaultSlow:
		return checkDist("extra latency", f.Extra)
	case sim.FaultCapacity:
		if !(f.Factor > 0 && f.Factor <= 1) {
			return fmt.Errorf("capacity factor %v is outside (0, 1]", f.Factor)
		}
		if workers <= 0 {
			return errors.New("a capacity fault needs Server.Limit.Concurrency")
		}
	default:
		return fmt.Errorf("unknown fault kind %v", f.Kind)
	}
	return nil
}

// policyAliases are the live mode's extra names for standard policies.
var policyAliases = map[string]string{"naive": sim.PolicyImmediate}

// resolve returns the canonical name of a policy the scenario accepts:
// a custom policy's name as written, or a standard policy's name.
func (sc *Scenario) resolve(name string) (string, bool) {
	n := strings.TrimSpace(name)
	if slices.ContainsFunc(sc.Custom, func(p sim.Policy) bool { return p.Name == n }) {
		return n, true
	}
	if c, ok := policyAliases[strings.ToLower(n)]; ok {
		n = c
	}
	return sim.CanonicalPolicy(n)
}

// KnownPolicy reports whether the scenario accepts name as a policy: one of
// its Custom policies, a standard policy name, or an alias.
func (sc *Scenario) KnownPolicy(name string) bool {
	_, ok := sc.resolve(name)
	return ok
}

// policy returns the definition of the policy called name (canonical).
func (sc *Scenario) policy(name string) (sim.Policy, error) {
	for _, p := range sc.Custom {
		if p.Name == name {
			return p, nil
		}
	}
	return sim.StandardPolicy(name, sc.Params)
}

// policyDoc defines the policy called name for the legend: a standard
// policy as sim.PolicyDoc describes it with the scenario's parameters
// (with the live mode's scope noted by the caller), a custom one by its
// name only.
func (sc *Scenario) policyDoc(name string) string {
	for _, p := range sc.Custom {
		if p.Name == name {
			return ""
		}
	}
	return sim.PolicyDoc(name, sc.Params)
}

// DefaultPolicies are the policies a scenario without Policies compares:
// immediate (naive) retries, exponential backoff without and with full
// jitter, full jitter with a retry budget, and the same with a breaker.
func DefaultPolicies() []string {
	return []string{sim.PolicyImmediate, sim.PolicyExponential, sim.PolicyFull, sim.PolicyBudget, sim.PolicyGuarded}
}

// policyNames resolves names (or the scenario's defaults when empty) to
// canonical names, without duplicates.
func (sc *Scenario) policyNames(names []string) ([]string, error) {
	if len(names) == 0 {
		names = sc.Policies
	}
	if len(names) == 0 {
		names = DefaultPolicies()
	}
	var out []string
	for _, n := range names {
		c, ok := sc.resolve(n)
		if !ok {
			return nil, fmt.Errorf("%w: scenario %s has no policy %q (standard: %s; naive = immediate)",
				sim.ErrPolicy, sc.Name, n, strings.Join(sim.PolicyNames(), ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: scenario %s: no policy to run", sim.ErrPolicy, sc.Name)
	}
	return out, nil
}
