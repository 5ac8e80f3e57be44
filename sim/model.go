package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// Model describes a simulated system: a population of clients making calls
// into a chain of servers (tiers), the network between them, and a fault
// schedule. Tiers[0] is called by the clients; when there are several tiers,
// every request that Tiers[i] serves makes one call to Tiers[i+1] while it
// holds its worker (thread-per-request), and answers once that call ends.
//
// A Model is a description only; Run executes it.
type Model struct {
	// Clients is the number of client processes. Each has its own arrival
	// stream, and its own budget and breaker when the policy has them.
	Clients int
	// Arrival is each client's call pattern.
	Arrival Arrival
	// Duration is how long clients start new calls.
	Duration time.Duration
	// Drain is how long the run continues after Duration so that calls in
	// flight can end. 0: 30s. Calls still open at the end count as failed.
	Drain time.Duration
	// RecoveryTolerance is how long after the last fault a recovery may
	// take and still count as slow rather than stuck: a policy that has
	// not recovered is called stuck only when the clients went on for at
	// least RecoveryTolerance + StuckMargin (10s) after the fault, and
	// unobserved otherwise (Recording.RecoveryTolerance). 0:
	// DefaultRecoveryTolerance (10s), so stuck needs 20s of traffic after
	// the fault.
	RecoveryTolerance time.Duration
	// hooks, set by the package's tests only, script service and observe
	// cancellations.
	hooks *simHooks
	// windows, when set, are the faults whose windows the run is measured
	// by (baseline, recovery) in place of Faults: a reference run has no
	// fault but the windows of the case it is the reference of.
	windows []Fault
	// MaxEvents caps the events of one trial: a run that needs more stops
	// with an error wrapping ErrNoProgress that names the cap. 0:
	// DefaultMaxEvents.
	MaxEvents uint64
	// Tiers are the servers, outermost first. At least one.
	Tiers []Tier
	// Faults change the servers and the network during windows of time.
	Faults []Fault
	// Measure names the tier whose offered load, concurrency and queue are
	// reported. "": the last tier.
	Measure string
	// Warmup is excluded from the baseline window. The baseline is
	// [Warmup, first fault start), or [Warmup, Duration) without faults.
	Warmup time.Duration
	// Bucket is the time resolution of the recorded series. 0: 10ms.
	Bucket time.Duration
	// Reports, if set, makes each client keep its records in a bounded
	// queue and deliver them in batches (see ReportQueue): every arrival
	// is a report, every call a delivery. nil: every arrival is a call.
	Reports *ReportQueue
}

// Defaults for zero Model fields.
const (
	DefaultDrain  = 30 * time.Second
	DefaultBucket = 10 * time.Millisecond
)

// ArrivalKind selects how a client spaces its calls.
type ArrivalKind uint8

// Arrival patterns.
const (
	// Poisson: exponential gaps with mean 1/Rate.
	Poisson ArrivalKind = iota
	// Periodic: one call every Interval, from a random phase in
	// [0, Interval) drawn per client (telemetry agents, cron jobs).
	Periodic
)

// Arrival is one client's call pattern.
type Arrival struct {
	// Kind is the pattern: Poisson (the zero value) or Periodic.
	Kind     ArrivalKind
	Rate     float64       // Poisson: calls per second per client
	Interval time.Duration // Periodic: time between calls
}

// Stream returns the arrival stream of client number client in a run
// seeded with seed: the times at which Run starts that client's calls.
// Each client draws from a generator of its own, derived from seed and its
// number alone, so every policy compared meets the same calls; the live
// package draws its schedule with Stream, so a live run starts the calls
// a simulated one would.
func (a Arrival) Stream(seed uint64, client int) ArrivalStream {
	return ArrivalStream{a: a, src: *rand.NewPCG(seed, uint64(client)*0x9e3779b97f4a7c15+1)}
}

// ArrivalStream draws one client's call times (see Arrival.Stream): First
// once, then Next for each following call. It is not safe for concurrent
// use.
type ArrivalStream struct {
	a   Arrival
	src rand.PCG
}

// First returns the time of the client's first call: a phase drawn
// uniformly in [0, Interval) for Periodic, an exponential gap for Poisson.
func (s *ArrivalStream) First() time.Duration {
	if s.a.Kind == Periodic {
		return time.Duration(float64(s.a.Interval) * s.unit())
	}
	return s.Next()
}

// Next returns the time from the client's last call to its next one:
// Interval for Periodic, an exponential gap of mean 1/Rate for Poisson.
func (s *ArrivalStream) Next() time.Duration {
	if s.a.Kind == Periodic {
		return s.a.Interval
	}
	return time.Duration(-math.Log1p(-s.unit()) / s.a.Rate * float64(time.Second))
}

// unit returns a uniform float64 in [0, 1).
func (s *ArrivalStream) unit() float64 { return float64(s.src.Uint64()>>11) / (1 << 53) }

// Tier is a server: a pool of workers in front of a FIFO queue.
//
// An arriving request starts at once if a worker is free, waits in the queue
// if there is room, and is otherwise refused at once with ErrOverloaded
// (HTTP 503). Service time is drawn from Service and multiplied by the
// degradation factor at the moment service starts.
type Tier struct {
	// Name labels the tier: Model.Measure picks the measured tier by it.
	Name string
	// Workers is the number of requests served at once. 0: unlimited
	// (every request is served at once).
	Workers int
	// Queue is the waiting room. 0: unlimited; -1: none (refuse when all
	// workers are busy). faultinject.Limit, and so a live scenario's
	// Server.Limit, reads 0 as none: live.Scenario.SimModel turns it into
	// -1, and a scenario file refuses a queue of 0 for reading two ways.
	Queue int
	// Service is the time one request occupies a worker, before any call
	// to the next tier.
	Service Dist
	// Latency is the one-way network latency of each leg into this tier
	// (request and reply are drawn independently).
	Latency Dist
	// FailProb is the probability that an attempt fails (ErrServer) at the
	// end of its service, independently of everything else.
	FailProb float64
	// Degrade makes service slower as the queue grows.
	Degrade Degrade
	// Timeout is how long this tier's callers wait for one attempt, when
	// their policy sets no AttemptTimeout. 0: no timeout.
	Timeout time.Duration
	// StragglerProb is the probability that a request is a straggler,
	// independently of every other: its service time is drawn from
	// Straggler instead of Service (a heavy tail: most answers fast, a
	// small share very slow). 0: none.
	StragglerProb float64
	// Straggler is the service time of a straggler, in place of Service;
	// unused when StragglerProb is 0.
	Straggler Dist
}

// Degrade models a server that gets slower when overloaded (lock
// contention, cache thrashing, GC): once more than Knee requests are
// queued, service time is multiplied by 1 + Slope·(queued-Knee)/Workers,
// capped at MaxFactor. The zero Degrade never slows down. Validate
// refuses negative fields.
type Degrade struct {
	// Knee is the queue length up to which service keeps its speed. 0:
	// any queued request slows service.
	Knee int
	// Slope is how fast service slows past Knee: the factor grows by
	// Slope for each Workers requests queued beyond Knee (Workers read as
	// 1 when unlimited). 0: no slowdown.
	Slope float64
	// MaxFactor caps the factor service time is multiplied by. 0: 10.
	MaxFactor float64
}

func (d Degrade) factor(queued, workers int) float64 {
	if d.Slope <= 0 || queued <= d.Knee {
		return 1
	}
	f := 1 + d.Slope*float64(queued-d.Knee)/float64(max(workers, 1))
	limit := d.MaxFactor
	if limit <= 0 {
		limit = 10
	}
	return min(f, limit)
}

// FaultKind says what a Fault does.
type FaultKind uint8

// Fault kinds.
const (
	// FaultUnavailable: the tier answers every arriving attempt at once
	// with ErrUnavailable (a restart answering 503).
	FaultUnavailable FaultKind = iota
	// FaultHang: the tier accepts attempts and never answers them; only
	// the caller's timeout ends them.
	FaultHang
	// FaultLoss: each attempt sent to the tier is lost in the network with
	// probability Prob, before the tier sees it; the caller hears nothing
	// until its timeout.
	FaultLoss
	// FaultLatency: Extra is added to each network leg into the tier (the
	// request and the reply): the network is slow, the tier's workers are
	// not held any longer. In the live lab the server waits Extra before
	// taking the request and again before answering, outside its workers.
	FaultLatency
	// FaultCapacity: only Factor of the tier's workers serve, rounded to
	// the nearest whole worker and at least one when Factor > 0 (the rest
	// finish what they hold and then idle); the live lab rounds the same way. No effect on a tier with
	// unlimited workers.
	FaultCapacity
	// FaultErrors: each attempt fails with probability Prob (ErrServer).
	FaultErrors
	// FaultRestart: at Start the tier drops every request it holds, in
	// service or queued (their callers get ErrUnavailable at once, as from
	// a reset connection), then answers ErrUnavailable until End.
	FaultRestart
	// FaultReplyLoss: each reply the tier sends is lost in the network
	// with probability Prob, after the tier did the work (and freed its
	// worker); the caller hears nothing until its timeout, and its retry
	// makes the tier do the work again.
	FaultReplyLoss
	// FaultSlow: Extra is added to the service time of each request that
	// starts service in the window: the tier itself is slow and holds its
	// workers longer (a slow dependency, a GC pause).
	FaultSlow
)

var faultNames = [...]string{"unavailable", "hang", "loss", "latency", "capacity", "errors", "restart", "reply-loss", "slow"}

// String returns the kind's name as used in scenario files.
func (k FaultKind) String() string {
	if int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("fault(%d)", k)
}

// ParseFaultKind returns the kind named s.
func ParseFaultKind(s string) (FaultKind, bool) {
	for i, n := range faultNames {
		if n == s {
			return FaultKind(i), true
		}
	}
	return 0, false
}

// Fault changes one tier, or the network in front of it, during
// [Start, End).
type Fault struct {
	// Kind is what the fault does (FaultUnavailable, the zero value, and
	// the others).
	Kind FaultKind
	// Tier is the index in Model.Tiers of the tier the fault hits (0: the
	// tier the clients call).
	Tier int
	// Start and End bound the fault's window of virtual time from the
	// run's start: it is active from Start until just before End.
	// Validate wants 0 ≤ Start < End and Start before Model.Duration.
	Start, End time.Duration
	Prob       float64 // FaultLoss, FaultReplyLoss, FaultErrors: in (0, 1]
	Factor     float64 // FaultCapacity: share of workers left, in [0, 1]
	Extra      Dist    // FaultLatency, FaultSlow
}

func (f *Fault) active(t time.Duration) bool { return t >= f.Start && t < f.End }

// Policy is how one caller retries: the real backoff strategy, budget and
// breaker, called in the order retry.Do calls them.
type Policy struct {
	// Name labels the policy; Single makes it the Variant's name, which
	// names the policy's rows in reports. The run does not read it.
	Name string
	// MaxAttempts bounds attempts per call, the first included. 0: no
	// count limit (MaxElapsed, the budget or the breaker stop the call).
	MaxAttempts int
	// Backoff builds the strategy for a run, given the run's seeded random
	// source. nil: retry at once, without waiting.
	Backoff func(rand.Source) backoff.Strategy
	// AttemptTimeout bounds each attempt. 0: the tier's Timeout.
	AttemptTimeout time.Duration
	// MaxElapsed bounds the whole call as retry.Policy.MaxElapsed does.
	MaxElapsed time.Duration
	// MinAttemptTime is retry.Policy.MinAttemptTime.
	MinAttemptTime time.Duration
	// Budget builds one caller's retry budget (see RatioBudget,
	// WindowBudget). nil: none.
	Budget func(Env) retry.Budget
	// ShareBudget builds one budget for every caller using the policy on
	// its hop, a fleet-shared budget (every client records into it and
	// withdraws from it), instead of one per caller.
	ShareBudget bool
	// ShareBreaker builds one breaker for every caller using the policy
	// on its hop, instead of one per caller.
	ShareBreaker bool
	// Breaker builds one caller's circuit breaker (see Breaker). nil: none.
	Breaker func(Env) retry.Breaker
	// Limiter builds one caller's client-side limiter (retry.Limiter, as
	// retry.Policy.Limiter: see SRELimiter, AdaptiveLimiter). nil: none.
	// Every attempt, first or retry, asks it before the breaker, as
	// retry.Call.Begin does; a refusal ends the call (retry.ReasonThrottled)
	// and counts in Metrics.LocalRejected; done hears the attempt's result
	// exactly once (the breaker's error when the breaker then refuses).
	// AdaptiveLimiter's limiter reserves its token and the attempt waits
	// the reserved time on the virtual clock, unless the wait would end
	// after the call's MaxElapsed (a refusal then, as a context deadline
	// makes it). Any other limiter is asked with the call's deadline
	// (its start plus MaxElapsed), or, without MaxElapsed, a deadline of
	// now, so that one that would block (a plain throttle.Adaptive)
	// refuses instead of waiting for virtual time that cannot pass.
	Limiter func(Env) retry.Limiter
	// Hedge makes the callers on this hop hedge (see Hedge). nil: no
	// hedging.
	Hedge *Hedge
	// BreakerRetriesOnly consults the breaker for retries only: first
	// attempts always go out (and their results are still reported to the
	// breaker when it admits them). This is the "stop retrying when the
	// failure rate is high" breaker of the token-bucket experiments.
	BreakerRetriesOnly bool
	// LayerRule makes the callers on this hop obey the layer rule of
	// retry.Policy.Nested = retry.NestedOneLayer (the core's default): a
	// call made while serving an inbound attempt whose caller retries it
	// (announced Will-Retry, or an attempt number above 1) makes one
	// attempt and stops with retry.ErrNestedRetry. false models
	// retry.NestedIgnore: every hop retries by its own count, the naive
	// chain. Every caller announces what retry.Call.WillRetry would (see
	// AnnouncesRetry), whatever its own rule.
	LayerRule bool
	// OverloadMarker makes the tier this hop calls (Tiers[i] for
	// Policies[i]) answer the requests it sheds (a full queue) with the
	// overload marker, retry.Overloaded(ErrOverloaded): no caller retries
	// an error carrying it (retry.IsOverloaded, as retry.Call.Next
	// classifies it), and a tier whose own call ended with it answers its
	// caller with the marker too (as the core's server middleware passes
	// it up), so the whole chain stops.
	OverloadMarker bool
}

// Hedge is package hedge's rule (hedge.Hedger), modelled in the
// simulator: hedge.Do runs attempts on goroutines and waits on timers,
// which a single-threaded virtual time cannot host, so the run applies
// its rule with the real hedge.Adaptive for the delay;
// TestHedgeRuleMatchesHedgeDo checks the two on the same scripted
// attempts. Each round of attempts (the call's first attempt, or a retry
// once every attempt of the previous round has failed) arms a timer of
// its own, for the delay as of the round's start (Adaptive's percentile
// once it has its samples; Delay until then), unless the call has no
// hedge left (MaxHedges counts the hedges of the whole call), a refusal
// stopped its hedging, the hop has a Limiter, or the attempt is the last
// the policy's MaxAttempts allows. When the timer goes off while the
// round still waits, a hedge is sent if the attempt limit (hedges count
// as attempts), the layer rule (Policy.LayerRule: no hedge for a call
// whose inbound caller retries, as retry.Policy.NestedForbids), the
// breaker (Ready) and the budget (Withdraw(hedge.ErrHedge)) allow; a
// refusal stops the call's hedging; the next hedge of the round waits
// the round's delay again. The first success wins and ends the call; the
// attempts still running are cancelled, as hedge.Do cancels their
// contexts and hedge.Transport their requests: their breaker, limiter
// and budget hear context.Canceled (which counts against none of them),
// and the tier gives them up (a request on its way is dropped on
// arrival, a queued one leaves the queue, one in service frees its
// worker and cancels the call its tier makes downstream for it). A
// failure while another attempt runs waits for it; when every attempt of
// the round has failed, the call retries as retry.Call.Next does,
// counting every attempt begun (hedges included) for the attempt limit
// and the backoff. The overload marker stops further hedges and any
// retry. Every attempt that wins feeds Adaptive its latency.
type Hedge struct {
	// Delay is the fixed delay, and Adaptive's until it has enough
	// samples. 0: hedge.DefaultDelay.
	Delay time.Duration
	// Adaptive, when set, configures one hedge.Adaptive for the hop (its
	// Clock is the run's), shared by every caller as the hedge package
	// advises.
	Adaptive *hedge.AdaptiveConfig
	// MaxHedges bounds the hedges of one call. 0: hedge.DefaultMaxHedges;
	// negative (hedge.NoHedges): none.
	MaxHedges int
}

// AnnouncesRetry reports what a caller on a hop announces on the attempt
// it sends (retry.Call.WillRetry, the Stormguard-Will-Retry header): for
// attempt n of a call under maxAttempts (0: no count limit), serving an
// inbound call whose caller retries (inboundRetries: announced Will-Retry
// or attempt above 1). The layer rule does not change the answer: a call
// it governs announces that its caller retries, one it does not govern
// announces its own count. The
// simulator computes the inbound facts of every tier's call with it;
// TestLayerRuleMatchesRetryCall checks it against the real retry.Call.
func AnnouncesRetry(n, maxAttempts int, inboundRetries bool) bool {
	if inboundRetries {
		return true
	}
	return maxAttempts <= 0 || n < maxAttempts
}

// Variant is one contender in a comparison: a name and the policy used for
// the calls into each tier (Policies[i] is used by the callers of Tiers[i]).
// A shorter slice leaves the remaining hops without retries.
type Variant struct {
	// Name names the contender. A ModelSpec's Custom variant needs one,
	// distinct from the others', by which ModelSpec.Policies and
	// Options.Policies pick it; a run's rows are named by the name the
	// contender was picked by.
	Name string
	// Policies are the hops' policies: Policies[i] for the callers of
	// Tiers[i] (the clients for i = 0). nil: no hop retries.
	Policies []Policy
	// Doc defines the contender in one line, for the policy legend under
	// the tables ("" leaves it out).
	Doc string
}

// Single returns a Variant that applies p to the clients' calls only.
func Single(p Policy) Variant { return Variant{Name: p.Name, Policies: []Policy{p}} }

// Errors attempts end with. All are retryable under retry.DefaultClassifier.
var (
	ErrUnavailable = errors.New("sim: 503 service unavailable")
	ErrOverloaded  = errors.New("sim: 503 overloaded (queue full)")
	ErrServer      = errors.New("sim: 500 server error")
)

// ErrModel is wrapped by the errors Validate returns.
var ErrModel = errors.New("sim: invalid model")

// Validate reports whether m can be run.
func (m *Model) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrModel}, args...)...)
	}
	if m.Clients <= 0 || m.Clients > 10_000_000 {
		return bad("clients must be in [1, 10000000], got %d", m.Clients)
	}
	if m.Duration <= 0 || m.Duration > maxDuration {
		return bad("duration must be in (0, %s], got %s", maxDuration, m.Duration)
	}
	if m.Drain < 0 || m.Drain > maxDuration {
		return bad("drain must be in [0, %s], got %s", maxDuration, m.Drain)
	}
	if m.Bucket < 0 || (m.Bucket > 0 && m.Bucket < time.Microsecond) {
		return bad("bucket must be at least 1µs")
	}
	if h := m.horizon(); int64(h/m.bucket()) > 50_000_000 {
		return bad("run of %s at %s buckets is too fine", h, m.bucket())
	}
	switch m.Arrival.Kind {
	case Poisson:
		if !(m.Arrival.Rate > 0) || m.Arrival.Rate > 1e6 {
			return bad("poisson rate must be in (0, 1e6] per client, got %g", m.Arrival.Rate)
		}
	case Periodic:
		if m.Arrival.Interval <= 0 {
			return bad("periodic interval must be positive")
		}
	default:
		return bad("unknown arrival kind %d", m.Arrival.Kind)
	}
	if m.Reports != nil {
		if err := m.Reports.validate(); err != nil {
			return bad("%v", err)
		}
	}
	if len(m.Tiers) == 0 || len(m.Tiers) > 16 {
		return bad("need 1 to 16 tiers, got %d", len(m.Tiers))
	}
	for i, t := range m.Tiers {
		if t.Workers < 0 || t.Queue < -1 {
			return bad("tier %d: workers and queue must not be negative", i)
		}
		if !(t.FailProb >= 0 && t.FailProb <= 1) {
			return bad("tier %d: fail probability must be in [0, 1]", i)
		}
		if t.Degrade.Knee < 0 || t.Degrade.Slope < 0 || t.Degrade.MaxFactor < 0 || math.IsNaN(t.Degrade.Slope) || math.IsNaN(t.Degrade.MaxFactor) {
			return bad("tier %d: degrade settings must not be negative", i)
		}
		if t.Timeout < 0 {
			return bad("tier %d: timeout must not be negative", i)
		}
	}
	if m.MeasureTier() < 0 {
		return bad("no tier named %q to measure", m.Measure)
	}
	for i, f := range m.Faults {
		if f.Tier < 0 || f.Tier >= len(m.Tiers) {
			return bad("fault %d: tier %d out of range", i, f.Tier)
		}
		if f.Start < 0 || f.End <= f.Start {
			return bad("fault %d: window [%s, %s) is empty or negative", i, f.Start, f.End)
		}
		if f.Start >= m.Duration {
			return bad("fault %d starts at %s, when the clients have stopped starting calls (duration %s): no call would meet it; start it earlier or run longer", i, f.Start, m.Duration)
		}
		if f.Kind >= FaultKind(len(faultNames)) {
			return bad("fault %d: unknown kind %d", i, f.Kind)
		}
		if !(f.Prob >= 0 && f.Prob <= 1) || !(f.Factor >= 0 && f.Factor <= 1) {
			return bad("fault %d: probability and factor must be in [0, 1]", i)
		}
		switch f.Kind {
		case FaultLoss, FaultReplyLoss, FaultErrors:
			if f.Prob == 0 {
				return bad("fault %d: a %s fault with probability 0 does nothing: give it a probability in (0, 1]", i, faultNames[f.Kind])
			}
		case FaultCapacity:
			if m.Tiers[f.Tier].Workers == 0 {
				return bad("fault %d: a capacity fault on tier %d, whose workers are unlimited, does nothing: give the tier workers", i, f.Tier)
			}
		}
	}
	calls := m.expectedCalls()
	if calls > MaxExpectedCalls {
		return bad("the workload would start about %.3g calls (clients × rate × duration), more than the %d a run may take (MaxExpectedCalls)", calls, MaxExpectedCalls)
	}
	capEvents := m.MaxEvents
	if capEvents == 0 {
		capEvents = DefaultMaxEvents
	}
	if calls*MinEventsPerCall > float64(capEvents) {
		return bad("the workload would start about %.3g calls (clients × rate × duration) of at least %d events each, more than the trial's event cap of %d (Model.MaxEvents)",
			calls, MinEventsPerCall, capEvents)
	}
	return nil
}

// CheckBaseline reports an error wrapping ErrModel when m's first fault
// starts at or before the end of its warm-up, or the warm-up does not end
// before Duration: such a model has no baseline window, so peak× and
// recovery would be judged against nothing. Scenarios refuse such models
// (Run still accepts them, for tests of the mechanics alone).
func (m *Model) CheckBaseline() error {
	s, _, ok := FaultWindow(m.Faults)
	if !ok {
		return nil
	}
	if m.Warmup >= m.Duration {
		return fmt.Errorf("%w: warmup %s must end before duration %s", ErrModel, m.Warmup, m.Duration)
	}
	if s <= m.Warmup {
		return fmt.Errorf("%w: the first fault starts at %s, not after the warm-up (%s): no baseline to judge load and recovery against; start it later or shorten the warm-up", ErrModel, s, m.Warmup)
	}
	return nil
}

// MaxExpectedCalls bounds the calls a model's workload may start, so
// that a typing slip (10M clients at 1e6 calls/s for 24h) is refused at
// once instead of running for days. It agrees with the default event
// cap: DefaultMaxEvents / MinEventsPerCall, the most calls a trial could
// take at the fewest events each; Validate also holds the calls against
// the model's own MaxEvents.
const MaxExpectedCalls = DefaultMaxEvents / MinEventsPerCall

// expectedCalls is the mean number of calls the clients start.
func (m *Model) expectedCalls() float64 {
	switch m.Arrival.Kind {
	case Poisson:
		return float64(m.Clients) * m.Arrival.Rate * m.Duration.Seconds()
	case Periodic:
		return float64(m.Clients) * (m.Duration.Seconds()/m.Arrival.Interval.Seconds() + 1)
	}
	return 0
}

// MeasureTier returns the index of the measured tier, or -1 when Measure
// names no tier.
func (m *Model) MeasureTier() int {
	if m.Measure == "" {
		return len(m.Tiers) - 1
	}
	for i, t := range m.Tiers {
		if t.Name == m.Measure {
			return i
		}
	}
	return -1
}

func (m *Model) drain() time.Duration {
	if m.Drain == 0 {
		return DefaultDrain
	}
	return m.Drain
}

func (m *Model) horizon() time.Duration { return m.Duration + m.drain() }

func (m *Model) bucket() time.Duration {
	if m.Bucket == 0 {
		return DefaultBucket
	}
	return m.Bucket
}

// simHooks lets a test script a run: service, when set, replaces the
// service time and failure draws of attempt n of a call (its tier, the
// time), and cancelled hears every attempt a caller cancels.
type simHooks struct {
	service   func(now time.Duration, tier, n int) (d time.Duration, fail bool)
	cancelled func(now time.Duration, tier, n int)
}
