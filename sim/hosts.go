package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// This file is the lab's "one bad host among ten" (issue 37): one client
// fleet calling ten hosts, one of which is down for 30s, with the
// breaker or the budget shared by every host or one per host: the real
// keyed.Breakers and keyed.Budgets on the run's virtual clock, asked for
// the call's member with the call's key (keyed.WithKey) as retry.Do asks
// them (BreakerFor, BudgetFor), once per call.

// HostsModel is a client fleet calling Hosts hosts: Clients processes
// each start calls as a Poisson process of Rate per second for Duration,
// each call to a host drawn uniformly (the same host for every
// contender: the draw depends on the seed, the client and the call
// only). A host serves every request at once (no capacity limit) in
// Service, and fails each attempt with probability FailProb (a 500).
// Host Down answers every attempt that reaches it from DownFrom to
// DownTo with 503, unless NoFault is set; the figures cover the calls
// started in that window, host Down's apart from the others'. RunHosts
// refuses a field outside the range given below.
type HostsModel struct {
	// Clients is the number of client processes, in [1, 10000].
	Clients int
	// Rate is each client's calls per second, in (0, 1e5].
	Rate float64
	// Duration is how long the clients start calls, in (0, 1h].
	Duration time.Duration
	// Drain is how long the run goes on after Duration, for the calls
	// under way to end, in [0, 1h]; a call still running then counts as
	// not succeeded.
	Drain time.Duration
	// Hosts is the number of hosts, in [1, 1000000].
	Hosts int
	// Service is a host's time to serve one attempt (an attempt the
	// outage answers takes none).
	Service Dist
	// Latency is the one-way network latency, drawn for the request and
	// for the reply of each attempt.
	Latency Dist
	// FailProb is the probability, in [0, 1], that a host fails an
	// attempt it serves (ErrServer).
	FailProb float64
	// Down is the index of the host that goes down, from 0; one outside
	// [0, Hosts) downs none, and the Bad figures stay zero.
	Down int
	// DownFrom and DownTo bound the outage, [DownFrom, DownTo) of virtual
	// time; RunHosts refuses an empty window (DownTo <= DownFrom) or a
	// negative DownFrom, even with NoFault.
	DownFrom, DownTo time.Duration
	// NoFault keeps host Down up; the figures still cover the calls
	// started in [DownFrom, DownTo), for a run to compare with.
	NoFault bool
}

// HostsPolicy is how each client retries: at most MaxAttempts attempts,
// full jitter from Base capped at Max, and a breaker and a budget, each
// shared by the client's calls to every host or one per host (keyed).
// Every client process has its own.
type HostsPolicy struct {
	// Name names the policy in the tables and in errors.
	Name string
	// MaxAttempts bounds each call's attempts, the first included, in
	// [1, 100] (RunHosts refuses anything else).
	MaxAttempts int
	// Base and Max are the backoff.Exponential's (doubling, full
	// jitter): zero takes its defaults, 100ms and 10s.
	Base, Max time.Duration
	// Breaker configures the client's breaker (its Clock and Rand are
	// replaced by the run's). nil: none.
	Breaker *breaker.Config
	// Budget configures the client's budget.Ratio. nil: none.
	Budget *budget.RatioConfig
	// PerHostBreaker gives each client one breaker per host
	// (keyed.Breakers) instead of one for all of them.
	PerHostBreaker bool
	// PerHostBudget gives each client one budget per host
	// (keyed.Budgets) instead of one for all of them.
	PerHostBudget bool
	// Doc defines the policy in one line, for the policy legend.
	Doc string
}

// HostGroupStats are the figures of a group of hosts (the healthy ones,
// or the bad one) over the outage: the calls started in it.
type HostGroupStats struct {
	// Calls is the number of calls started in the outage window to the
	// group's hosts, and Succeeded how many of them succeeded by the end
	// of the run (a mean over trials in the scenario's rows).
	Calls, Succeeded float64
	// Attempts the calls sent; Retries of them; FirstFailed the calls
	// whose first attempt failed.
	Attempts, Retries, FirstFailed float64
	// Refused counts the attempts the breaker refused (never sent).
	Refused float64
}

// Success is Succeeded / Calls.
func (g HostGroupStats) Success() float64 { return ratio(g.Succeeded, g.Calls) }

// RetriesPerFailure is the retries sent per call whose first attempt
// failed: the retries the group still gets.
func (g HostGroupStats) RetriesPerFailure() float64 { return ratio(g.Retries, g.FirstFailed) }

// AttemptsPerCall is Attempts / Calls.
func (g HostGroupStats) AttemptsPerCall() float64 { return ratio(g.Attempts, g.Calls) }

func (g *HostGroupStats) add(o HostGroupStats, w float64) {
	g.Calls += o.Calls * w
	g.Succeeded += o.Succeeded * w
	g.Attempts += o.Attempts * w
	g.Retries += o.Retries * w
	g.FirstFailed += o.FirstFailed * w
	g.Refused += o.Refused * w
}

// HostsResult is one run of a HostsModel.
type HostsResult struct {
	// Healthy are the figures of the calls to every host but Down, Bad
	// those of the calls to host Down.
	Healthy, Bad HostGroupStats
	// HealthyGoodput is the healthy hosts' successful calls per second
	// over the outage.
	HealthyGoodput float64
	// Events is the number of events the run processed.
	Events uint64
}

type hostsRun struct {
	m    *HostsModel
	p    *HostsPolicy
	s    *Sim
	clk  *Clock
	seed uint64
	res  HostsResult
}

type hostsClient struct {
	br  retry.Breaker
	bu  retry.Budget
	bo  backoff.Strategy
	ctx []context.Context // per host, carrying its key
}

type hostsCall struct {
	cl      *hostsClient
	host    int
	counted bool
	br      retry.Breaker
	bu      retry.Budget
	n       int
	prev    time.Duration
}

func (m *HostsModel) window(t time.Duration) bool { return t >= m.DownFrom && t < m.DownTo }

// RunHosts runs m once under p with seed.
func RunHosts(ctx context.Context, m *HostsModel, p HostsPolicy, seed uint64) (HostsResult, error) {
	switch {
	case m.Clients <= 0 || m.Clients > 10_000 || !(m.Rate > 0) || m.Rate > 1e5:
		return HostsResult{}, fmt.Errorf("%w: hosts model: clients must be in [1, 10000] and the rate in (0, 1e5] per client, got %d and %g", ErrModel, m.Clients, m.Rate)
	case m.Hosts <= 0 || m.Hosts > 1_000_000 || m.Duration <= 0 || m.Duration > time.Hour || m.Drain < 0 || m.Drain > time.Hour:
		return HostsResult{}, fmt.Errorf("%w: hosts model: hosts must be in [1, 1000000], the duration in (0, 1h] and the drain in [0, 1h]", ErrModel)
	case m.DownTo <= m.DownFrom || m.DownFrom < 0:
		return HostsResult{}, fmt.Errorf("%w: hosts model: the outage window [%s, %s) is empty", ErrModel, m.DownFrom, m.DownTo)
	case !(m.FailProb >= 0 && m.FailProb <= 1):
		return HostsResult{}, fmt.Errorf("%w: hosts model: fail probability %g must be in [0, 1]", ErrModel, m.FailProb)
	case p.MaxAttempts <= 0 || p.MaxAttempts > 100:
		return HostsResult{}, fmt.Errorf("%w: hosts policy %s: attempts must be in [1, 100], got %d", ErrPolicy, p.Name, p.MaxAttempts)
	}
	s := New(seed)
	r := &hostsRun{m: m, p: &p, s: s, clk: s.Clock(), seed: seed}
	env := Env{Clock: r.clk, Rand: rand.NewPCG(seed, 0xb4d)}
	for c := 0; c < m.Clients; c++ {
		cl := &hostsClient{bo: backoff.Exponential{Base: p.Base, Max: p.Max, Jitter: backoff.Full, Rand: rand.NewPCG(seed, uint64(c)+1)}}
		if p.Breaker != nil {
			bc := *p.Breaker
			bc.Clock, bc.Rand = env.Clock, rand.NewPCG(seed, uint64(c)+0x1000)
			if p.PerHostBreaker {
				g, err := keyed.NewBreakers(keyed.Config{}, bc)
				if err != nil {
					return HostsResult{}, err
				}
				cl.br = g
			} else {
				cl.br = breaker.New(bc)
			}
		}
		if p.Budget != nil {
			bc := *p.Budget
			if p.PerHostBudget {
				g, err := keyed.NewBudgets(keyed.Config{Clock: env.Clock}, func() retry.Budget { return budget.NewRatio(bc) })
				if err != nil {
					return HostsResult{}, err
				}
				cl.bu = g
			} else {
				cl.bu = budget.NewRatio(bc)
			}
		}
		for h := 0; h < m.Hosts; h++ {
			cl.ctx = append(cl.ctx, keyed.WithKey(context.Background(), "host-"+strconv.Itoa(h)))
		}
		st := Arrival{Kind: Poisson, Rate: m.Rate}.Stream(seed, c)
		r.startStream(cl, c, &st)
	}
	if err := s.RunUntilContext(ctx, m.Duration+m.Drain, DefaultMaxEvents); err != nil {
		return HostsResult{}, err
	}
	r.res.Events = s.Events()
	s.release()
	r.res.HealthyGoodput = r.res.Healthy.Succeeded / (m.DownTo - m.DownFrom).Seconds()
	return r.res, nil
}

func (r *hostsRun) startStream(cl *hostsClient, c int, st *ArrivalStream) {
	at := st.First()
	k := 0
	var next func()
	next = func() {
		k++
		// The host: a draw of the seed, the client and the call alone.
		h := int(splitmix(r.seed^uint64(c)<<32^uint64(k)) % uint64(r.m.Hosts))
		r.startCall(cl, h)
		at += st.Next()
		if at < r.m.Duration {
			r.clk.AfterFunc(at-r.s.Now(), next)
		}
	}
	if at < r.m.Duration {
		r.clk.AfterFunc(at, next)
	}
}

func (r *hostsRun) group(call *hostsCall) *HostGroupStats {
	if !call.counted {
		return nil
	}
	if call.host == r.m.Down {
		return &r.res.Bad
	}
	return &r.res.Healthy
}

// startCall resolves the call's breaker and budget once, as retry.Do
// does (retry.ResolveGroups), and makes its first attempt.
func (r *hostsRun) startCall(cl *hostsClient, h int) {
	call := &hostsCall{cl: cl, host: h, counted: r.m.window(r.s.Now()), br: cl.br, bu: cl.bu}
	ctx := cl.ctx[h]
	if g, ok := call.br.(retry.BreakerGroup); ok {
		call.br = g.BreakerFor(ctx)
	}
	if g, ok := call.bu.(retry.BudgetGroup); ok {
		call.bu = g.BudgetFor(ctx)
	}
	if g := r.group(call); g != nil {
		g.Calls++
	}
	r.attempt(call)
}

// attempt follows retry.Do: breaker Allow, the attempt, breaker done,
// budget Record.
func (r *hostsRun) attempt(call *hostsCall) {
	call.n++
	g := r.group(call)
	done := func(error) {}
	if call.br != nil {
		d, err := call.br.Allow()
		if err != nil {
			if g != nil {
				g.Refused++
				if call.n == 1 {
					g.FirstFailed++
				}
			}
			return // the call fails: the breaker refused
		}
		done = d
	}
	if g != nil {
		g.Attempts++
		if call.n > 1 {
			g.Retries++
		}
	}
	rng := r.s.Rand()
	d := r.m.Latency.Sample(rng)
	arrive := r.s.Now() + d
	var err error
	if call.host == r.m.Down && !r.m.NoFault && r.m.window(arrive) {
		err = ErrUnavailable
	} else {
		d += r.m.Service.Sample(rng)
		if rng.Float64() < r.m.FailProb {
			err = ErrServer
		}
	}
	d += r.m.Latency.Sample(rng)
	r.clk.AfterFunc(d, func() { r.ended(call, done, err) })
}

// ended hears an attempt's result; after a failure it goes on as
// retry.Do: the attempt limit, the backoff, breaker Ready, budget
// Withdraw, the wait.
func (r *hostsRun) ended(call *hostsCall, done func(error), err error) {
	done(err)
	if call.bu != nil {
		call.bu.Record(call.n > 1, err)
	}
	g := r.group(call)
	if err == nil {
		if g != nil {
			g.Succeeded++
		}
		return
	}
	if g != nil && call.n == 1 {
		g.FirstFailed++
	}
	if call.n >= r.p.MaxAttempts {
		return
	}
	delay := call.cl.bo.Delay(call.n, call.prev)
	call.prev = delay
	if call.br != nil && call.br.Ready() != nil {
		return
	}
	if call.bu != nil && !call.bu.Withdraw(err) {
		return
	}
	r.clk.AfterFunc(delay, func() { r.attempt(call) })
}

// badHostModel is the scenario's model: 10 clients at 100 calls/s
// (1,000/s) to ten hosts, each failing 5% of attempts; host 0 down (503)
// from 20s to 50s.
func badHostModel() HostsModel {
	return HostsModel{
		Clients: 10, Rate: 100, Duration: 70 * time.Second, Drain: 5 * time.Second,
		Hosts: 10, Service: Uniform(5*time.Millisecond, 15*time.Millisecond), Latency: Normal(time.Millisecond, 200*time.Microsecond),
		FailProb: 0.05, Down: 0, DownFrom: 20 * time.Second, DownTo: 50 * time.Second,
	}
}

// Breaker and budget of the bad-host scenario.
var (
	badHostBreaker = breaker.Config{Window: breaker.Window{Duration: 10 * time.Second, FailureRatio: 0.2, MinCalls: 20}, OpenTimeout: 2 * time.Second}
	badHostBudget  = budget.TenPercent()
)

func badHostPolicies() []HostsPolicy {
	base := HostsPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	mk := func(name string, br, bu, perBr, perBu bool, doc string) HostsPolicy {
		p := base
		p.Name, p.PerHostBreaker, p.PerHostBudget, p.Doc = name, perBr, perBu, doc
		if br {
			c := badHostBreaker
			p.Breaker = &c
		}
		if bu {
			c := badHostBudget
			p.Budget = &c
		}
		return p
	}
	return []HostsPolicy{
		mk("shared-breaker", true, false, false, false, "one breaker per client for all ten hosts (opens at 20% failed attempts of at least 20 in 10s, open 2s), 3 attempts with full jitter from 10ms"),
		mk("per-host-breaker", true, false, true, false, "the same breaker per host: keyed.Breakers, each call using its host's member"),
		mk("shared-budget", false, true, false, false, "one budget.TenPercent per client for all ten hosts (10 tokens, +0.1 per successful first try, a retry costs 1), 3 attempts with full jitter from 10ms"),
		mk("per-host-budget", false, true, false, true, "the same budget per host: keyed.Budgets, each call using its host's member"),
	}
}

// hostsRow is one policy's figures: the mean over trials, with the fault
// and without it (the same workload, no host down).
type hostsRow struct {
	Policy           string
	Fault, NoFault   HostsResult
	HealthySuccessSE float64 // the noise floor of the healthy success
}

func runHostsRow(ctx context.Context, m HostsModel, p HostsPolicy, seed uint64, trials int) (hostsRow, uint64, error) {
	row := hostsRow{Policy: p.Name}
	var events uint64
	clean := m
	clean.NoFault = true // no host down; the figures cover the same window
	for t := range trials {
		s := unitSeed(seed, 0, t)
		for _, v := range []struct {
			m   *HostsModel
			out *HostsResult
		}{{&m, &row.Fault}, {&clean, &row.NoFault}} {
			res, err := RunHosts(ctx, v.m, p, s)
			if err != nil {
				return row, events, err
			}
			events += res.Events
			w := 1 / float64(trials)
			v.out.Healthy.add(res.Healthy, w)
			v.out.Bad.add(res.Bad, w)
			v.out.HealthyGoodput += res.HealthyGoodput * w
		}
	}
	// Two-proportion standard error of the healthy success, fault
	// against no fault, over all trials' calls.
	n1, n2 := row.Fault.Healthy.Calls*float64(trials), row.NoFault.Healthy.Calls*float64(trials)
	p1, p2 := row.Fault.Healthy.Success(), row.NoFault.Healthy.Success()
	row.HealthySuccessSE = math.Sqrt(p1*(1-p1)/math.Max(n1, 1) + p2*(1-p2)/math.Max(n2, 1))
	return row, events, nil
}

// HostsNoiseSE is how many standard errors a difference must exceed to
// be told apart from noise in the bad-host verdict.
const HostsNoiseSE = 3

func (r hostsRow) healthyWithinNoise() bool {
	return math.Abs(r.Fault.Healthy.Success()-r.NoFault.Healthy.Success()) <= HostsNoiseSE*r.HealthySuccessSE
}

func newBadHostScenario() *Scenario {
	ps := badHostPolicies()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	sc := &Scenario{
		Name:     "bad-host",
		Title:    "One bad host among ten: shared against per-host breakers and budgets",
		Policies: names,
		Trials:   3,
		Doc: `Issue 37's lab: 10 client processes send 100 calls/s each (1,000/s) as Poisson processes, each call
to one of ten hosts drawn uniformly (the same host for every policy). A host serves at once in
[5ms, 15ms] with legs |Normal(1ms, 0.2ms)| and fails 5% of attempts (a 500); host 0 answers every
attempt with 503 from t=20s to t=50s. Each client makes up to 3 attempts with full jitter from
10ms, and has either one breaker (opens at 20% failed attempts of at least 20 in 10s, open 2s)
or one budget.TenPercent, shared by its calls to every host or one per host (the real
keyed.Breakers and keyed.Budgets, each call asking for its host's member once, as retry.Do
does). Measured over the outage, for the calls started in it: the healthy hosts' success and
goodput against the same policy's run with no host down (the noise floor: 3 standard errors of
the difference of the two success rates), the retries they still get (retries per call whose
first attempt failed), and the bad host's attempts per call (isolation).`,
	}
	sc.known = func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	sc.own = sc.known
	sc.run = func(ctx context.Context, o *Options) (*Report, error) {
		if o.Clients > 0 || o.Duration > 0 {
			return nil, fmt.Errorf("%w: %w: bad-host keeps its clients and duration", ErrScenario, ErrIgnoredOption)
		}
		m := badHostModel()
		rows := make([]hostsRow, len(o.Policies))
		events := make([]uint64, len(o.Policies))
		err := parallel(ctx, o.Workers, len(o.Policies), o.Progress, func(i int) error {
			for _, p := range ps {
				if p.Name == o.Policies[i] {
					var err error
					rows[i], events[i], err = runHostsRow(ctx, m, p, o.Seed, o.Trials)
					return err
				}
			}
			return fmt.Errorf("%w: no policy %q", ErrPolicy, o.Policies[i])
		})
		if err != nil {
			return nil, err
		}
		rep := &Report{Cases: []Case{{Name: "host 0 down for 30s", FaultStartS: m.DownFrom.Seconds(), FaultEndS: m.DownTo.Seconds(), TrafficEndS: m.Duration.Seconds()}}}
		for _, e := range events {
			rep.Events += e
		}
		for _, r := range rows {
			rep.Cases[0].Rows = append(rep.Cases[0].Rows, Row{Policy: r.Policy})
		}
		rep.Tables = []Table{hostsTable(rows)}
		rep.Verdict = []string{hostsVerdict(rows)}
		for _, n := range o.Policies {
			for _, p := range ps {
				if p.Name == n {
					rep.PolicyLegend = append(rep.PolicyLegend, [2]string{n, p.Doc})
				}
			}
		}
		return rep, nil
	}
	return sc
}

func hostsTable(rows []hostsRow) Table {
	t := Table{
		Title: "One bad host among ten: host 0 down (503) from 20s to 50s",
		Header: []string{"policy", "healthy success", "no fault", "healthy goodput", "no fault", "healthy retries/failure", "no fault",
			"bad success", "bad att/call", "bad refused"},
	}
	for _, r := range rows {
		f, n := r.Fault, r.NoFault
		mark := ""
		if !r.healthyWithinNoise() {
			mark = " !"
		}
		t.Rows = append(t.Rows, []string{r.Policy,
			FormatShare(f.Healthy.Success()) + mark, FormatShare(n.Healthy.Success()),
			fmt.Sprintf("%.0f/s", f.HealthyGoodput), fmt.Sprintf("%.0f/s", n.HealthyGoodput),
			fmt.Sprintf("%.2f", f.Healthy.RetriesPerFailure()), fmt.Sprintf("%.2f", n.Healthy.RetriesPerFailure()),
			FormatShare(f.Bad.Success()), fmt.Sprintf("%.2f", f.Bad.AttemptsPerCall()), fmt.Sprintf("%.0f", f.Bad.Refused)})
	}
	t.Notes = []string{"over the outage, for the calls started in it (the mean of the trials); no fault: the same policy and workload with no host down; ! marks a healthy success more than 3 standard errors from its no-fault level (the noise floor); retries/failure: retries sent per call whose first attempt failed; bad refused: attempts to the bad host the breaker refused"}
	return t
}

func hostsVerdict(rows []hostsRow) string {
	var kept, lost []string
	for _, r := range rows {
		s := fmt.Sprintf("%s (%s against %s)", r.Policy, FormatShare(r.Fault.Healthy.Success()), FormatShare(r.NoFault.Healthy.Success()))
		if r.healthyWithinNoise() {
			kept = append(kept, s)
		} else {
			lost = append(lost, s)
		}
	}
	var b strings.Builder
	b.WriteString("host 0 down for 30s: ")
	if len(kept) > 0 {
		fmt.Fprintf(&b, "the healthy hosts keep their no-fault success within the noise floor under %s", list(kept))
	}
	if len(lost) > 0 {
		if len(kept) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "they lose it under %s", list(lost))
	}
	for _, r := range rows {
		if r.Policy == "shared-budget" || r.Policy == "per-host-budget" {
			fmt.Fprintf(&b, "; %s grants the healthy hosts %.2f retries per failed first try (%.2f without the fault)", r.Policy, r.Fault.Healthy.RetriesPerFailure(), r.NoFault.Healthy.RetriesPerFailure())
		}
	}
	b.WriteString(".")
	return b.String()
}
