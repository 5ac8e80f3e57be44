package sim

import (
	"cmp"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/budget"
)

// Scenarios returns the built-in scenarios in the order of the default
// suite. Each call returns fresh values.
func Scenarios() []*Scenario {
	out := []*Scenario{newOCCScenario()}
	for _, spec := range builtinSpecs() {
		var sc *Scenario
		var err error
		if spec.Name == "retry-budget" {
			sc, err = newCombinedScenario(spec, retryBudgetClientsSpec())
		} else {
			sc, err = NewModelScenario(spec)
		}
		if err != nil {
			panic("sim: built-in scenario " + spec.Name + ": " + err.Error())
		}
		out = append(out, sc)
	}
	return out
}

// Lookup returns the built-in scenario called name: one of the default
// suite's, or one that runs by name only (NamedScenarios).
func Lookup(name string) (*Scenario, bool) {
	for _, sc := range append(Scenarios(), namedScenarios()...) {
		if sc.Name == name {
			return sc, true
		}
	}
	return nil, false
}

func builtinSpecs() []ModelSpec {
	return []ModelSpec{retryBudgetSpec(), gatewaySpec(), packetLossSpec(), metastableSpec(), cascadeSpec(), brownoutSpec(), stragglerSpec()}
}

// retryBudgetSpec is the open-loop model of the token-bucket experiments.
func retryBudgetSpec() ModelSpec {
	probs := []float64{0.01, 0.10, 0.20, 0.50, 0.75}
	var cases []ModelCase
	for _, p := range probs {
		cases = append(cases, ModelCase{
			Name:  fmt.Sprintf("p=%g%%", 100*p),
			X:     100 * p,
			Apply: func(m *Model) { m.Tiers[0].FailProb = p },
		})
	}
	bucket := budget.RatioConfig{MaxTokens: 5, Refill: 0.1, RetryCost: 1, Threshold: 1}
	return ModelSpec{
		Name:  "retry-budget",
		Title: "Retries against a failing server: token bucket and retry breaker",
		Doc: `The open-loop model of the "fixing retries with token buckets and circuit breakers"
experiments. 100 clients each send calls as a Poisson process at 10 per second for 10s. Every
network leg takes Exp(mean 10ms). The server has no capacity limit and fails each attempt
independently with probability p, swept over 1%, 10%, 20%, 50% and 75%. Contenders: no retries;
3 immediate retries (success 1-p^4, load 1+p+p^2+p^3 attempts per call); the post's two models
exactly as published, each per client: published-bucket (starts full at 5 tokens, +0.1 token on
every first try whatever its outcome, a retry costs 1 and needs more than 1, at most 3 retries)
and published-breaker (no retries, first tries still go out, while failures ÷ attempts exceed
10%, counted over the client's whole run: no window, no open period). Beside them, the same ideas
built from stormguard's own code: token-bucket (the real budget.Ratio: capacity 5, starting full,
+0.1 token per successful first try only, a retry costs 1 and needs more than 1 token) and
retry-breaker (the real breaker: time window of 10s, 10% failure rate, at least 10 calls, open
for 1s, then probes). They differ from the published models on purpose: budget.Ratio earns
nothing from failed calls, so under heavy failure it grants fewer retries; the real breaker
forgets old calls and half-opens, so it lets retries back sooner once failures subside.
Reported: success rate and load, the attempts per call.
The second table keeps the total rate at 1,000 calls/s and the failure probability at 50%, and
spreads the calls over 10, 100 or 1,000 clients (100, 10 or 1 call/s each), as the post does:
the published per-client bucket lets more retries through as each client sends fewer calls
(each starts with 5 tokens, which a client sending 10 calls in the run spends on half of them),
the published breaker stays conservative at every size, and fleet-bucket, the same bucket
shared by the whole fleet (one per downstream, as the README advises), holds the load at 1.1
attempts per call whatever the number of clients. --clients does not change this sweep.`,
		Model: Model{
			Clients:  100,
			Arrival:  Arrival{Kind: Poisson, Rate: 10},
			Duration: 10 * time.Second,
			Drain:    5 * time.Second,
			Tiers:    []Tier{{Name: "server", Latency: Exp(10 * time.Millisecond)}},
		},
		Cases:      cases,
		SweepLabel: "server failure probability (%)",
		Policies:   []string{PolicyNoRetry, PolicyImmediate, "published-bucket", "token-bucket", "published-breaker", "retry-breaker"},
		Custom: []Variant{
			{Name: "published-bucket", Policies: []Policy{{Name: "published-bucket", MaxAttempts: 4, Budget: PublishedBucket()}}, Doc: docPublishedBucket},
			{Name: "published-breaker", Policies: []Policy{{
				Name: "published-breaker", MaxAttempts: 4, BreakerRetriesOnly: true, Breaker: PublishedBreaker(),
			}}, Doc: docPublishedBreaker},
			{Name: "token-bucket", Policies: []Policy{{Name: "token-bucket", MaxAttempts: 4, Budget: RatioBudget(bucket)}},
				Doc: "3 immediate retries through the real budget.Ratio per client: 5 tokens, starting full, +0.1 per successful first try only, a retry costs 1 and needs more than 1"},
			{Name: "retry-breaker", Policies: []Policy{{
				Name: "retry-breaker", MaxAttempts: 4, BreakerRetriesOnly: true,
				Breaker: Breaker(breakerRate(0.1, 10*time.Second, 10, time.Second)),
			}}, Doc: "3 immediate retries behind the real breaker per client, for retries only: opens at 10% failures of at least 10 calls in 10s, open 1s, then probes"},
		},
		Trials: 3,
	}
}

// Docs of the retry-budget scenario's published models.
const (
	docPublishedBucket  = "the post's per-client token bucket: starts full at 5 tokens, +0.1 on every first try whatever its outcome, a retry costs 1 and needs more than 1; at most 3 immediate retries"
	docPublishedBreaker = "the post's per-client retry breaker: no retries while failures ÷ attempts over the client's whole run exceed 10% (first tries always go out); at most 3 immediate retries"
)

func withDoc(v Variant, doc string) Variant {
	v.Doc = doc
	return v
}

// ClientSweepFailProb is the server's failure probability in the
// retry-budget scenario's client sweep.
const ClientSweepFailProb = 0.5

// retryBudgetClientsSpec is the retry-budget scenario's second part: the
// same total rate spread over 10, 100 or 1,000 clients, with the
// published per-client bucket and breaker and a fleet-shared bucket.
func retryBudgetClientsSpec() ModelSpec {
	var cases []ModelCase
	for _, n := range []int{10, 100, 1000} {
		cases = append(cases, ModelCase{
			Name: Commas(n) + " clients", X: float64(n),
			Apply: func(m *Model) { m.Clients, m.Arrival.Rate = n, 1000/float64(n) },
		})
	}
	return ModelSpec{
		Name:  "retry-budget-clients",
		Title: fmt.Sprintf("Retries by number of clients at 1,000 calls/s in all, server failing %.0f%% of attempts", 100*ClientSweepFailProb),
		Doc:   "(part of retry-budget)",
		Model: Model{
			Clients:  100,
			Arrival:  Arrival{Kind: Poisson, Rate: 10},
			Duration: 10 * time.Second,
			Drain:    5 * time.Second,
			Tiers:    []Tier{{Name: "server", Latency: Exp(10 * time.Millisecond), FailProb: ClientSweepFailProb}},
		},
		Cases:      cases,
		SweepLabel: "clients (1,000 calls/s in all)",
		Policies:   []string{PolicyImmediate, "published-bucket", "published-breaker", "fleet-bucket"},
		Custom: []Variant{
			{Name: "published-bucket", Policies: []Policy{{Name: "published-bucket", MaxAttempts: 4, Budget: PublishedBucket()}}, Doc: docPublishedBucket},
			{Name: "published-breaker", Policies: []Policy{{
				Name: "published-breaker", MaxAttempts: 4, BreakerRetriesOnly: true, Breaker: PublishedBreaker(),
			}}, Doc: docPublishedBreaker},
			{Name: "fleet-bucket", Policies: []Policy{{Name: "fleet-bucket", MaxAttempts: 4, Budget: PublishedBucket(), ShareBudget: true}},
				Doc: "published-bucket's rules, one bucket shared by the whole fleet"},
		},
		Columns: []string{"success", "apc"},
		Trials:  3,
	}
}

// gatewaySpec is a collector restart under a fleet of telemetry agents.
func gatewaySpec() ModelSpec {
	small := budget.RatioConfig{MaxTokens: 3, Refill: 0.1, RetryCost: 1}
	params := PolicyParams{MaxAttempts: -1, Base: time.Second, Max: 30 * time.Second, MaxElapsed: 60 * time.Second, Budget: &small}
	shared, err := StandardPolicy(PolicyBudget, params)
	if err != nil {
		panic(err)
	}
	// The live lab's default: one budget for the whole fleet.
	shared.Name, shared.ShareBudget = "full+shared-budget", true
	return ModelSpec{
		Name:  "gateway-restart",
		Title: "Telemetry gateway restart: 5,000 agents; the collector restarts and answers 503 for 3s",
		TitleFor: func(m *Model) string {
			return fmt.Sprintf("Telemetry gateway restart: %s agents; the collector restarts and answers 503 %s",
				Commas(m.Clients), FaultSpan(m.Faults[0], m.Duration))
		},
		Doc: `5,000 telemetry agents each report once every 10s, from a random phase (500 calls/s). The
collector has 75 workers, service time uniform in [50ms, 150ms] (capacity 750/s, 1.5x the steady
rate) and a queue of 750; a request finding the queue full is refused with 503. Network legs
take |Normal(20ms, 5ms)|; an attempt times out after 2s. At t=20s the collector restarts: the
requests it holds fail at once (reset connections), and it answers every request with 503 for 3s. Agents retry until success for up to 60s per report, with
backoff from 1s (1s, 2s, 4s ... capped at 30s): without jitter, with equal jitter, with full
jitter, with full jitter plus a small per-agent token bucket (3 tokens, +0.1 per success), and
with the same bucket shared by the whole fleet (full+shared-budget, the live lab's default);
naive immediate retries (3 of them) are shown for contrast.
Shows: the peak of arrivals once the collector is back ("peak× after", apart from the outage,
during which 503s return at once and immediate retries pile up), the retry waves with their
times (listed under the table and marked on the charts: without jitter the requests the restart
dropped come back in vertical waves at about +1s, +3s and +7s; jitter spreads them), how long
the collector takes to drain (recovery), and the total work. Each agent keeps its reports in a
bounded queue (ReportQueue: 10 reports, drop-oldest, batches of up to 10, the rules of the queue
package): a delivery that gives up (a budget refusing its retry, its 60s spent) puts its reports
back and the agent pauses for its next backoff, so a refused retry delays reports instead of
losing them; "delivered/late/dropped" counts the reports, while success counts the deliveries.
A delivery after a pause is a new call, whose first attempt no budget gates: that is why the
shared budget, which refuses almost every retry (1.00 attempts per call), still sees the
redelivered reports arrive after the restart.
Three trials by default: peak× and success show their 95% confidence intervals, and a peak whose
interval overlaps the lowest one's is marked ≈ (not told apart from it).`,
		Model: Model{
			Clients:  5000,
			Arrival:  Arrival{Kind: Periodic, Interval: 10 * time.Second},
			Duration: 60 * time.Second,
			Drain:    60 * time.Second,
			Warmup:   10 * time.Second,
			Tiers: []Tier{{
				Name: "collector", Workers: 75, Queue: 750,
				Service: Uniform(50*time.Millisecond, 150*time.Millisecond),
				Latency: Normal(20*time.Millisecond, 5*time.Millisecond),
				Timeout: 2 * time.Second,
			}},
			Faults:  []Fault{{Kind: FaultRestart, Start: 20 * time.Second, End: 23 * time.Second}},
			Reports: &ReportQueue{Capacity: 10},
		},
		Params:   params,
		Policies: []string{PolicyImmediate, PolicyExponential, PolicyEqual, PolicyFull, PolicyBudget, "full+shared-budget"},
		Custom:   []Variant{{Name: shared.Name, Policies: []Policy{shared}, Doc: "full+budget's bucket, one shared by the whole fleet"}},
		Cases:    []ModelCase{{Note: waveNote}},
		// Three trials: the table shows each peak's confidence interval
		// and marks the peaks that cannot be told apart.
		Columns: []string{"amp", "after", "attempts", "apc", "success", "inrun", "reports", "conc", "queue", "recovery", "p50", "p99", "sync", "kurt"},
		Trials:  3,
	}
}

// packetLossSpec is steady traffic through a lossy network: requests lost
// at 70% load (no storm), and replies lost at 95% load in front of a deep
// queue (a storm).
func packetLossSpec() ModelSpec {
	twenty := budget.RatioConfig{MaxTokens: 20, Refill: 0.2, RetryCost: 1}
	budget10, err := StandardPolicy(PolicyBudget, PolicyParams{Base: 50 * time.Millisecond, Max: 2 * time.Second})
	if err != nil {
		panic(err)
	}
	budget10.Name = "full+budget-10%"
	return ModelSpec{
		Name:  "packet-loss",
		Title: "Packet loss under steady load: 5,000 QPS, 10% of requests or replies lost for 20s",
		TitleFor: func(m *Model) string {
			return fmt.Sprintf("Packet loss under steady load: %s QPS, %.0f%% of requests or replies lost %s",
				Commas(int(m.offeredPerS()+0.5)), 100*m.Faults[0].Prob, FaultSpan(m.Faults[0], m.Duration))
		},
		Doc: `50 client processes send 100 calls/s each as Poisson processes (5,000 QPS) to a server with
100 workers. Network legs take |Normal(2ms, 0.5ms)|; the client times out an attempt after 500ms,
and the server, which does not learn that, still serves timed-out requests. From t=10s to t=30s,
10% of the packets of one direction are lost. Fixed retries without backoff (3 immediate
retries), full jitter (base 50ms) alone, and full jitter with a per-process token bucket sized
for 20% of traffic (full+budget) or the usual 10% (full+budget-10%).
  requests lost at 70% load: exponential service time of mean 14ms (capacity 7,143/s) and a
  queue of 2,000; the lost requests never reach the server. Every policy stays near 1.1x: a
  lost request costs the server nothing, and its retry fits in the 30% headroom.
  replies lost at 95% load, deep queue: service of mean 19ms (capacity 5,263/s) and a queue of
  10,000; the replies are lost after the server has done the work. This is where loss becomes
  a storm, and it takes every one of these conditions: (1) lost replies, so each retry repeats
  work already done (request loss adds none); (2) utilisation near capacity, so that repeated
  work (10% more) exceeds it (95% x 1.1 = 105%); (3) a queue deep enough that the wait outgrows
  the client's timeout (10,000 / 5,263/s = 1.9s against 500ms) while (4) the server keeps
  working on requests whose caller has timed out. Then answers come too late, every attempt
  times out after it cost a full service, every call retries up to its limit, and the load
  stays multiplied after the loss ends: the retrying policies without a budget stay stuck at
  about 3 attempts per call and near 6x the load. The budgets hold the peak near the baseline
  (1.2x to 1.3x), but a server at 95% cannot absorb even their few percent of repeated work
  once its queue is past the timeout: they stay stuck too, losing far fewer calls. Take one condition away and the storm does not start: at 70% load
  lost replies add about 4% attempts and nothing else; at 95% load with the 2,000 queue (a
  wait of 380ms, within the timeout) the queue fills, the overflow is refused at once, and the
  server recovers within seconds of the loss ending. Connection re-establishment cost, the
  fourth candidate, is not modelled (the live lab's clients reuse connections).
Shows: the peak offered load, the peak number of open connections, and the recovery time.`,
		Model: Model{
			Clients:  50,
			Arrival:  Arrival{Kind: Poisson, Rate: 100},
			Duration: 50 * time.Second,
			Drain:    10 * time.Second,
			Warmup:   5 * time.Second,
			Tiers: []Tier{{
				Name: "server", Workers: 100, Queue: 2000,
				Service: Exp(14 * time.Millisecond),
				Latency: Normal(2*time.Millisecond, 500*time.Microsecond),
				Timeout: 500 * time.Millisecond,
			}},
			Faults: []Fault{{Kind: FaultLoss, Start: 10 * time.Second, End: 30 * time.Second, Prob: 0.10}},
		},
		Cases: []ModelCase{
			{Name: "requests lost at 70% load"},
			{Name: "replies lost at 95% load, deep queue", Apply: func(m *Model) {
				m.Faults[0].Kind = FaultReplyLoss
				m.Tiers[0].Service = Exp(19 * time.Millisecond)
				m.Tiers[0].Queue = 10000
			}},
		},
		Params:   PolicyParams{Base: 50 * time.Millisecond, Max: 2 * time.Second, Budget: &twenty},
		Policies: []string{PolicyNoRetry, PolicyImmediate, PolicyFull, PolicyBudget, "full+budget-10%"},
		Custom: []Variant{{Name: budget10.Name, Policies: []Policy{budget10},
			Doc: "full jitter from 50ms plus budget.TenPercent per process (10 tokens, +0.1 per successful first try)"}},
		Columns: []string{"amp", "attempts", "apc", "success", "inrun", "inflight", "conc", "recovery", "p50", "p99", "p999"},
		Trials:  3,
	}
}

// metastableSpec is a database pushed into a metastable overload: the
// lab's blip, where retries and the database's slowdown both hold it
// down; the paper's own example, where retries alone do; and a stall,
// where the slowdown alone does.
func metastableSpec() ModelSpec {
	db := Tier{
		Name: "database", Workers: 24, Queue: 3000,
		Service: Uniform(60*time.Millisecond, 100*time.Millisecond),
		Latency: Normal(time.Millisecond, 200*time.Microsecond),
		Degrade: Degrade{Knee: 150, Slope: 0.05, MaxFactor: 1.5},
		Timeout: time.Second,
	}
	return ModelSpec{
		Name:  "metastable",
		Title: "Metastable failure: a database at 93% load after a 10s network blip, slow queries or a stall",
		TitleFor: func(m *Model) string {
			return fmt.Sprintf("Metastable failure: a database at %.0f%% load after a network blip %s, slow queries or a stall",
				100*m.offeredPerS()/capacity(m), FaultSpan(m.Faults[0], m.Duration))
		},
		Doc: `10 application instances send 28 calls/s each (280/s) as Poisson processes to a database with
24 workers and service time uniform in [60ms, 100ms] (300/s: every answer under 100ms). The app
times out an attempt after 1s; the database does not notice and still serves timed-out requests.
Three cases separate the two mechanisms that can hold such a system down after its trigger is
gone: retries that outgrow the capacity, and a server that slows down when overloaded.
  blip (the lab's model): the database has a queue of 3,000 and degrades past its capacity: once
  more than 150 requests are queued, service time is multiplied by 1 + 0.05·(queued-150)/workers,
  up to 1.5x (200/s at the cap, below the 280/s offered). From t=20s to t=30s the network drops
  every attempt. After the blip, the retries of the calls still open arrive together with new
  calls; the retrying policies without a budget push the queue past the knee, the database slows
  to 200/s, every answer comes too late and every call retries: both mechanisms hold it down.
  No-retry and the budgets recover, but only because the blip dropped the attempts instead of
  queueing them: the queue is empty when it ends (the stall case shows what happens otherwise).
  paper (Bronson et al., HotOS '21, the paper's own example): no slowdown, an unbounded queue;
  from t=20s to t=30s every query takes 1s longer to reach the database (and to come back), so
  every attempt times out. retry-once is the paper's client: one retry, at once, after the 1s
  timeout. Its retries double the load to 560/s, far above the 300/s the database serves; the
  queue grows, answers keep coming after the timeout, and the retries alone keep it so after
  the trigger ends. No-retry never exceeds the capacity and recovers at once.
  stall (the slowdown alone): the blip's database, but the trigger is a 2s stall (no worker
  serves from t=20s to t=22s) that queues about 560 requests, past the knee: the database slows
  to 200/s and stays below the 280/s offered with no retry at all. Every policy that sends each
  call at least once stays stuck, budgets included: limiting retries cannot fix a server that
  serves less when loaded. Only full+budget+breaker recovers: its breaker, once open, refuses
  first tries too, and that shed load lets the queue drain.
Shows which policies return to the healthy state and how long they take (recovery "stuck" means
never within the run).`,
		Model: Model{
			Clients:  10,
			Arrival:  Arrival{Kind: Poisson, Rate: 28},
			Duration: 120 * time.Second,
			Drain:    10 * time.Second,
			Warmup:   5 * time.Second,
			Tiers:    []Tier{db},
			Faults:   []Fault{{Kind: FaultLoss, Start: 20 * time.Second, End: 30 * time.Second, Prob: 1}},
		},
		Cases: []ModelCase{
			{Name: "blip: retries and slowdown"},
			{Name: "paper: retries alone", Apply: func(m *Model) {
				m.Tiers[0].Degrade, m.Tiers[0].Queue = Degrade{}, 0
				m.Faults[0] = Fault{Kind: FaultLatency, Start: 20 * time.Second, End: 30 * time.Second, Extra: Const(time.Second)}
			}, Note: paperNote},
			{Name: "stall: slowdown alone", Apply: func(m *Model) {
				m.Faults[0] = Fault{Kind: FaultCapacity, Start: 20 * time.Second, End: 22 * time.Second, Factor: 0}
			}},
		},
		Params:   PolicyParams{Base: 100 * time.Millisecond, Max: 5 * time.Second, Interval: time.Second},
		Policies: append(PolicyNames(), "retry-once"),
		Custom: []Variant{{Name: "retry-once", Policies: []Policy{{Name: "retry-once", MaxAttempts: 2}},
			Doc: "the paper's client: one retry, at once, after the attempt timed out or failed"}},
		Trials: 3,
	}
}

// paperNote states the paper's figure beside the lab's for the metastable
// scenario's paper case.
func paperNote(c *Case) string {
	for _, r := range c.Rows {
		if r.Policy != "retry-once" || r.NotRun || len(r.trials) == 0 {
			continue
		}
		// 10s after the trigger, for up to 60s, within the traffic.
		from := c.FaultEndS + 10
		to := min(from+60, c.TrafficEndS)
		head := "Bronson et al. (HotOS '21): the retries double the load to 560 QPS against the database's 300, and it stays so after the trigger. "
		if to-from < 1 {
			return head + fmt.Sprintf("The lab cannot say: the traffic stops at %.0fs, less than 11s after the trigger", c.TrafficEndS)
		}
		var load float64
		for _, s := range r.trials {
			load += MeanRate(s.Load, s.StepMS, from, to) / float64(len(r.trials))
		}
		offered := cmp.Or(r.Metrics.ReferenceLoad, r.Metrics.BaselineLoad)
		return head + fmt.Sprintf("The lab, the mean of %s: retry-once sends %.0f attempts/s (%.2fx the %.0f/s offered) from %.0fs to %.0fs; recovery: %s",
			trialsPhrase(c), load, ratio(load, offered), offered, from, to, recoveryCell(r.Metrics))
	}
	return ""
}

// MeanRate returns the mean of a Series rate (Load, Retries, ...) whose
// steps are stepMS wide over [fromS, toS) seconds, or 0 when the window
// holds no step.
func MeanRate(rates []float64, stepMS, fromS, toS float64) float64 {
	var sum float64
	n := 0
	for i, v := range rates {
		if t := float64(i) * stepMS / 1000; t >= fromS && t < toS {
			sum += v
			n++
		}
	}
	return ratio(sum, float64(n))
}

// The cascade's guarded contenders (issue 20).
const (
	PolicyLayerRule  = "layer-rule"
	PolicyLayerGuard = "layer-rule+marker+budget"
)

// cascadeSpec is a three-tier chain with retries at every layer, over a
// database that loses half its workers (the partial case) or fails every
// attempt (the total case, where the closed forms hold: 4x4x4 = 64 with
// retries at every tier, and the SRE book's 3x and 1.1x at one tier).
func cascadeSpec() ModelSpec {
	threeRetries := func(name string, timeout time.Duration, withBudget bool) Policy {
		p, err := StandardPolicy(PolicyFull, PolicyParams{Base: 20 * time.Millisecond, Max: time.Second, AttemptTimeout: timeout})
		if err != nil {
			panic(err)
		}
		p.Name = name
		if withBudget {
			p.Budget = RatioBudget(budget.TenPercent())
		}
		return p
	}
	none := func(timeout time.Duration) Policy {
		return Policy{Name: "none", MaxAttempts: 1, AttemptTimeout: timeout}
	}
	timeouts := []time.Duration{4 * time.Second, time.Second, 250 * time.Millisecond}
	all := func(name string, withBudget bool) Variant {
		v := Variant{Name: name}
		for _, to := range timeouts {
			v.Policies = append(v.Policies, threeRetries(name, to, withBudget))
		}
		return v
	}
	one := Variant{Name: "retry-at-one-tier", Policies: []Policy{none(timeouts[0]), none(timeouts[1]), threeRetries("retry-at-one-tier", timeouts[2], false)},
		Doc: "only the service retries the database: 3 retries, full jitter from 20ms"}
	// The SRE book's two figures, at the users (the clients), as the book
	// has them per client: a request makes at most 3 attempts; and, on top
	// of that, a client retries only while retries stay within 10% of its
	// requests (a budget.Window of 10%, without a floor).
	sre := func(name string, withBudget bool) Variant {
		p := threeRetries(name, timeouts[0], false)
		p.MaxAttempts = 3
		if withBudget {
			p.Budget = WindowBudget(budget.WindowConfig{Window: 10 * time.Second, Ratio: 0.1, MinRetriesPerSecond: -1})
		}
		return Variant{Name: name, Policies: []Policy{p, none(timeouts[1]), none(timeouts[2])}}
	}
	// The guard (issue 20): the layer rule at every hop, the users
	// retrying; then the overload marker on the database's shedding and
	// a budget.TenPercent per caller on top.
	layer := func(name string, guard bool) Variant {
		v := all(name, guard)
		for i := range v.Policies {
			v.Policies[i].LayerRule = true
		}
		if guard {
			v.Policies[2].OverloadMarker = true
		}
		return v
	}
	return ModelSpec{
		Name:  "cascade",
		Title: "Retry cascade: edge -> service -> database, database at half capacity or down for 30s",
		TitleFor: func(m *Model) string {
			return fmt.Sprintf("Retry cascade: edge -> service -> database, database at %.0f%% capacity or down %s",
				100*m.Faults[0].Factor, FaultSpan(m.Faults[0], m.Duration))
		},
		Doc: `100 users send 3 calls/s each (300/s) to an edge tier, which calls a service tier, which calls a
database. Edge and service have 1,000 workers each and 2ms and 5ms of work per request; the
database has 20 workers with exponential service time of mean 40ms (500/s) and a queue of 1,000.
Network legs take |Normal(1ms, 0.2ms)|. Timeouts: users wait 4s for the edge, the edge 1s for the
service, the service 250ms for the database; a tier keeps working on a request whose caller gave
up. From t=20s to t=50s the database either loses half its workers (250/s, below the offered
300/s: the partial case) or answers every attempt with 503 (the total case).
Contenders: every hop retries 3 times (full jitter from 20ms): up to 4x4x4 = 64 database
attempts per user call; only the service retries the database; every hop retries 3 times
through a 10% token bucket per caller; and the SRE book's two figures, at the users only:
sre-3-attempts (at most 3 attempts per request: about 3x the load at worst) and sre-budget-10%
(the same, retrying only while retries stay within 10% of the client's requests: about 1.1x).
The column "in fault" is the load multiplier while the fault lasts: database attempts per user
call started during the fault (att/call mixes in the healthy calls before and after it, and
peak× the Poisson excess of the busiest second, so neither is the multiplier). In the total case
it reaches the closed forms: 64 with retries at every tier (a little less in the table: calls
started in the fault's last second meet a database that answers again), 4 at one tier, 3 for
sre-3-attempts and 1.1 for sre-budget-10%. budget-every-tier reads about 1.1 for another reason:
budget.Ratio earns tokens only from successes, so against a database that fails everything each
of the 100 users spends just the 10 tokens it starts with (1,000 retries for 9,000 calls). In the
partial case the storm of retries overloads the database's remaining half, so nearly every
attempt fails there too and the multiplier comes close to 64: the gap between the two cases is
the share of attempts the degraded database still answers in time. (With 400 edge workers, the
model before model_version 2, the edge itself saturated under the storm and capped the
multiplier: the lab read 43.8x peak instead of about 64x.) Retrying at every tier also keeps the
database overloaded after it comes back: 64 times the offered load keeps its queue full, and the
partial and total cases both stay stuck.
The guard (retry at one layer): layer-rule is retry-every-tier with the core's layer rule
(retry.Policy.Nested = retry.NestedOneLayer) at every hop: each caller announces its attempt
number and whether it will retry, and a hop serving a caller that retries makes one attempt,
so only the users retry: 4 attempts reach every tier (the "by tier" column), not 4, 16 and 64.
layer-rule+marker+budget adds the overload marker (the database answers what it sheds from a
full queue with retry.Overloaded, which no tier retries and each tier passes up) and a
budget.TenPercent token bucket per caller: at most 1.5x at every tier. In the total case the
database answers 503 without shedding, so the budget does the work there (1.1x); in the
partial case the marker stops the retries of shed requests, and the chain recovers where the
layer rule alone stays stuck at about 4x the load on half the database.
Shows the load on the database and at every tier, end-to-end success and latency.`,
		Model: Model{
			Clients:  100,
			Arrival:  Arrival{Kind: Poisson, Rate: 3},
			Duration: 90 * time.Second,
			Drain:    20 * time.Second,
			Warmup:   5 * time.Second,
			Tiers: []Tier{
				{Name: "edge", Workers: 1000, Service: Const(2 * time.Millisecond), Latency: Normal(time.Millisecond, 200*time.Microsecond)},
				{Name: "service", Workers: 1000, Service: Const(5 * time.Millisecond), Latency: Normal(time.Millisecond, 200*time.Microsecond)},
				{Name: "database", Workers: 20, Queue: 1000, Service: Exp(40 * time.Millisecond), Latency: Normal(time.Millisecond, 200*time.Microsecond)},
			},
			Faults: []Fault{{Kind: FaultCapacity, Tier: 2, Start: 20 * time.Second, End: 50 * time.Second, Factor: 0.5}},
		},
		Cases: []ModelCase{
			{Name: "partial: database at half capacity"},
			{Name: "total: database down", Apply: func(m *Model) {
				m.Faults[0] = Fault{Kind: FaultUnavailable, Tier: 2, Start: 20 * time.Second, End: 50 * time.Second}
			}},
		},
		Columns:  []string{"amp", "attempts", "apc", "fapc", "tiers", "goodput", "success", "inrun", "conc", "queue", "recovery", "p50", "p99", "p999", "sync", "kurt"},
		Policies: []string{"retry-every-tier", "retry-at-one-tier", "budget-every-tier", "sre-3-attempts", "sre-budget-10%", PolicyLayerRule, PolicyLayerGuard},
		Custom: []Variant{
			withDoc(all("retry-every-tier", false), "every hop retries 3 times (full jitter from 20ms): up to 4x4x4 = 64 database attempts per user call"),
			one,
			withDoc(all("budget-every-tier", true), "every hop retries 3 times through a budget.TenPercent token bucket per caller"),
			withDoc(sre("sre-3-attempts", false), "the SRE book's per-request limit, at the users: at most 3 attempts per request"),
			withDoc(sre("sre-budget-10%", true), "the SRE book's per-client budget, at the users: 3 attempts, retrying only while retries stay within 10% of the client's requests (budget.Window)"),
			withDoc(layer(PolicyLayerRule, false), "retry-every-tier under the layer rule (retry.NestedOneLayer at every hop): each caller announces Will-Retry and its attempt number, and a hop serving a caller that retries makes one attempt, so only the users retry"),
			withDoc(layer(PolicyLayerGuard, true), "layer-rule, plus the overload marker (the database answers the requests it sheds from a full queue with retry.Overloaded, which no tier retries and each passes up) and a budget.TenPercent token bucket per caller"),
		},
		Trials: 3,
	}
}
