package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// This file is issue #37's "one bad host among ten" on loopback: ten
// faultinject servers per policy, one of them down for a window, and one
// client fleet calling them through httpretry with the breaker or the
// budget shared by every host or one per host (keyed, by
// httpretry.HostKey). The same model runs in virtual time (sim.RunHosts)
// at the same parameters, for the comparison.

// BadHostScenario is RunBadHost's name on the command line ("stormsim
// live bad-host") and in its JSON: sim's bad-host scenario on real
// servers.
const BadHostScenario = "bad-host"

// Defaults of BadHostOptions.
const (
	DefaultBadHostClients     = 10
	DefaultBadHostRate        = 20
	DefaultBadHostCallTimeout = 5 * time.Second
	// BadHostHosts is the number of hosts (servers) per policy.
	BadHostHosts = 10
)

// The timeline of sim's bad-host scenario at Scale 1.
const (
	badHostDuration = 70 * time.Second
	badHostDrain    = 5 * time.Second
	badHostDownFrom = 20 * time.Second
	badHostDownTo   = 50 * time.Second
)

// BadHostPolicies returns sim's bad-host contenders, at Scale 1: up to 3
// attempts with full jitter from 10ms (capped at 100ms), and either a
// breaker (opening at 20% failed attempts of at least 20 in 10s, open
// 2s) or a budget.TenPercent, shared by a client's calls to every host
// or one per host (keyed.Breakers, keyed.Budgets).
func BadHostPolicies() []sim.HostsPolicy {
	br := func() *breaker.Config {
		return &breaker.Config{Window: breaker.Window{Duration: 10 * time.Second, FailureRatio: 0.2, MinCalls: 20}, OpenTimeout: 2 * time.Second}
	}
	bu := func() *budget.RatioConfig { c := budget.TenPercent(); return &c }
	base := sim.HostsPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	mk := func(name string, doc string, set func(*sim.HostsPolicy)) sim.HostsPolicy {
		p := base
		p.Name, p.Doc = name, doc
		set(&p)
		return p
	}
	return []sim.HostsPolicy{
		mk("shared-breaker", "one breaker per client for all ten hosts (opens at 20% failed attempts of at least 20 in 10s, open 2s), 3 attempts with full jitter from 10ms", func(p *sim.HostsPolicy) { p.Breaker = br() }),
		mk("per-host-breaker", "the same breaker per host: keyed.Breakers, the member of the request's httpretry.HostKey", func(p *sim.HostsPolicy) { p.Breaker, p.PerHostBreaker = br(), true }),
		mk("shared-budget", "one budget.TenPercent per client for all ten hosts (10 tokens, +0.1 per successful first try, a retry costs 1), 3 attempts with full jitter from 10ms", func(p *sim.HostsPolicy) { p.Budget = bu() }),
		mk("per-host-budget", "the same budget per host: keyed.Budgets, the member of the request's httpretry.HostKey", func(p *sim.HostsPolicy) { p.Budget, p.PerHostBudget = bu(), true }),
	}
}

// BadHostOptions configure RunBadHost. Zero fields take the defaults.
type BadHostOptions struct {
	// Clients is the number of client processes (default 10, at most
	// DefaultMaxClients), each with its own policy (breaker, budget,
	// backoff), as sim's clients have. Each starts calls as a Poisson
	// process of Rate per second (default 20: 200 calls/s for the fleet,
	// what loopback on two loaded cores carries for four policies at
	// once; sim's scenario runs 100), each call a GET to one of the ten
	// hosts drawn from Seed, the client and the call's time, the same for
	// every policy.
	Clients int
	Rate    float64
	// Scale stretches the timeline (default 1: sim's 70s of calls, host
	// 0 down from 20s to 50s, a 5s drain) and the breaker's window and
	// open period with it, so that a smaller Scale runs the same shape in
	// less time (0.1: 7s, host 0 down from 2s to 5s). At most 10.
	Scale float64
	// Seed draws the arrivals, the hosts, the servers' faults and service
	// times and the clients' jitter.
	Seed uint64
	// Policies are compared (default BadHostPolicies()), at Scale 1: the
	// run scales their breakers.
	Policies []sim.HostsPolicy
	// Sequential runs the policies one after another instead of at the
	// same time.
	Sequential bool
	// CallTimeout bounds each call (default 5s).
	CallTimeout time.Duration
}

func (o *BadHostOptions) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: bad-host: "+format, append([]any{ErrScenario}, args...)...)
	}
	if o.Clients == 0 {
		o.Clients = DefaultBadHostClients
	}
	if o.Rate == 0 {
		o.Rate = DefaultBadHostRate
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultBadHostCallTimeout
	}
	if o.Policies == nil {
		o.Policies = BadHostPolicies()
	}
	switch {
	case o.Clients < 0 || o.Clients > DefaultMaxClients:
		return bad("clients must be in [1, %d], got %d", DefaultMaxClients, o.Clients)
	case !(o.Rate > 0) || o.Rate*float64(o.Clients) > MaxCallRate:
		return bad("the fleet's rate must be in (0, %d] calls/s, got %g × %d", MaxCallRate, o.Rate, o.Clients)
	case !(o.Scale > 0) || o.Scale > 10:
		return bad("scale must be in (0, 10], got %g", o.Scale)
	case o.CallTimeout < 0 || o.CallTimeout > MaxDuration:
		return bad("call timeout must be in (0, %s]", MaxDuration)
	case len(o.Policies) == 0:
		return bad("no policy to run")
	}
	for _, p := range o.Policies {
		if p.MaxAttempts < 1 || p.MaxAttempts > MaxCascadeAttempts {
			return bad("policy %s: attempts must be in [1, %d], got %d", p.Name, MaxCascadeAttempts, p.MaxAttempts)
		}
	}
	if n := o.Rate * float64(o.Clients) * o.scaled(badHostDuration).Seconds(); n > MaxCalls {
		return bad("the run would start %.0f calls per policy, more than %d", n, MaxCalls)
	}
	return nil
}

// scaled returns d on the run's timeline, saturating.
func (o *BadHostOptions) scaled(d time.Duration) time.Duration {
	return time.Duration(math.Min(float64(d)*o.Scale, float64(MaxDuration)))
}

// Model returns the virtual model at the run's parameters (defaults
// filled in): what RunBadHost runs in virtual time beside the live run.
// Its legs are |Normal(100µs, 20µs)|, about loopback's.
func (o BadHostOptions) Model() (sim.HostsModel, error) {
	if err := o.defaults(); err != nil {
		return sim.HostsModel{}, err
	}
	return o.model(), nil
}

func (o *BadHostOptions) model() sim.HostsModel {
	return sim.HostsModel{
		Clients: o.Clients, Rate: o.Rate, Duration: o.scaled(badHostDuration), Drain: o.scaled(badHostDrain),
		Hosts: BadHostHosts, Service: sim.Uniform(5*time.Millisecond, 15*time.Millisecond), Latency: sim.Normal(100*time.Microsecond, 20*time.Microsecond),
		FailProb: 0.05, Down: 0, DownFrom: o.scaled(badHostDownFrom), DownTo: o.scaled(badHostDownTo),
	}
}

// scaledPolicy returns p with its breaker's window and open period on
// the run's timeline.
func (o *BadHostOptions) scaledPolicy(p sim.HostsPolicy) sim.HostsPolicy {
	if p.Breaker != nil {
		c := *p.Breaker
		c.Window.Duration = o.scaled(c.Window.Duration)
		c.OpenTimeout = o.scaled(c.OpenTimeout)
		c.MaxOpenTimeout = o.scaled(c.MaxOpenTimeout)
		p.Breaker = &c
	}
	return p
}

// BadHostReport is what RunBadHost measured, one row per policy.
type BadHostReport struct {
	// Options are the options as run, defaults filled in.
	Options BadHostOptions
	// Model is the virtual model run beside it at the same parameters.
	Model sim.HostsModel
	// Rows are in the order of Options.Policies.
	Rows []BadHostRow
	// ElapsedS is the run's wall time in seconds.
	ElapsedS float64
}

// BadHostRow is one policy's run, live and virtual. The groups are the
// nine healthy hosts and the bad one; "outage" is the calls started while
// host 0 was down, "before" those started before it: the live run's
// no-fault level, measured on the same machine in the same run (the
// virtual one runs the same model with no host down, as sim does).
type BadHostRow struct {
	// Policy is the policy as run (its breaker scaled).
	Policy sim.HostsPolicy
	// Healthy and Bad are the groups' figures over the outage; Refused
	// counts the calls the breaker stopped.
	Healthy, Bad sim.HostGroupStats
	// HealthyBefore and BadBefore are the same before the outage.
	HealthyBefore, BadBefore sim.HostGroupStats
	// HealthyGoodput and HealthyGoodputBefore are the healthy hosts'
	// successful calls per second during and before the outage.
	HealthyGoodput, HealthyGoodputBefore float64
	// HealthySuccessSE is the standard error of the difference between
	// the healthy success during and before the outage: the noise floor.
	HealthySuccessSE float64
	// Virtual and VirtualNoFault are sim.RunHosts at the same parameters
	// and seed, with host 0 down and with no host down.
	Virtual, VirtualNoFault sim.HostsResult
	// StartLagMax is how late the clients started a call against their
	// schedule at worst: a check on the harness.
	StartLagMax time.Duration
}

// HealthyWithinNoise reports whether the healthy hosts' success during
// the outage is within sim.HostsNoiseSE standard errors of its level
// before it (or above it).
func (r BadHostRow) HealthyWithinNoise() bool {
	return r.Healthy.Success() >= r.HealthyBefore.Success()-sim.HostsNoiseSE*r.HealthySuccessSE
}

// Row returns the row of the policy called name.
func (r *BadHostReport) Row(name string) (BadHostRow, bool) {
	for _, row := range r.Rows {
		if row.Policy.Name == name {
			return row, true
		}
	}
	return BadHostRow{}, false
}

// RunBadHost runs issue #37's one bad host among ten live: for each
// policy, ten faultinject servers on 127.0.0.1 (each failing 5% of
// requests with 500 and serving the rest in [5ms, 15ms]; host 0 answering
// 503 to every request while it is down), and Clients client processes
// sending GETs through httpretry.New(…, httpretry.WithRetry500(),
// httpretry.WithKey(httpretry.HostKey)) under their own retry.Policy. The
// policies run at the same time, on the same calls; each is also run in
// virtual time (sim.RunHosts) at the same parameters. RunBadHost returns
// when every call has ended and every server is shut down.
func RunBadHost(ctx context.Context, opts BadHostOptions) (*BadHostReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m := opts.model()
	sched := arrivalSchedule(sim.Arrival{Kind: sim.Poisson, Rate: opts.Rate}, opts.Clients, m.Duration, opts.Seed, MaxCalls)
	began := time.Now()
	start := began
	rows, err := runPolicies(opts.Policies, opts.Sequential, func(p sim.HostsPolicy) (BadHostRow, error) {
		p = opts.scaledPolicy(p)
		if opts.Sequential {
			return runBadHostPolicy(ctx, &opts, &m, p, time.Now(), sched)
		}
		return runBadHostPolicy(ctx, &opts, &m, p, start, sched)
	})
	if err != nil {
		return nil, err
	}
	for i := range rows {
		p := rows[i].Policy
		clean := m
		clean.NoFault = true
		if rows[i].Virtual, err = sim.RunHosts(ctx, &m, p, opts.Seed); err != nil {
			return nil, err
		}
		if rows[i].VirtualNoFault, err = sim.RunHosts(ctx, &clean, p, opts.Seed); err != nil {
			return nil, err
		}
	}
	return &BadHostReport{Options: opts, Model: m, Rows: rows, ElapsedS: time.Since(began).Seconds()}, nil
}

// Phases of a bad-host call, by when it started.
const (
	phaseBefore = iota
	phaseOutage
	phaseAfter
	phases
)

// badHostPhaseHeader carries the phase of the call a request belongs to.
const badHostPhaseHeader = "Live-Bad-Host-Phase"

// hostCounts are one host's server-side counts per phase.
type hostCounts struct {
	attempts, retries, firstOK [phases]atomic.Int64
}

// badHostHandler counts a request's attempt, then hands it to the
// injector.
type badHostHandler struct {
	counts *hostCounts
	next   http.Handler
}

func (h *badHostHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ph, err := strconv.Atoi(r.Header.Get(badHostPhaseHeader))
	if err != nil || ph < 0 || ph >= phases {
		ph = phaseAfter
	}
	n, _ := strconv.Atoi(r.Header.Get(AttemptHeader))
	h.counts.attempts[ph].Add(1)
	if n > 1 {
		h.counts.retries[ph].Add(1)
	}
	r = r.WithContext(context.WithValue(r.Context(), badHostPhaseKey{}, [2]int{ph, n}))
	h.next.ServeHTTP(w, r)
}

type badHostPhaseKey struct{}

// serviceWork holds a request for a service time drawn from its
// generator, stopping when the request's context ends.
type serviceWork struct {
	mu       sync.Mutex
	rng      *rand.Rand
	min, max time.Duration
	done     func(r *http.Request) // after the service, before the answer
}

func (s *serviceWork) draw() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.min + time.Duration(s.rng.Int64N(int64(s.max-s.min)+1))
}

func (s *serviceWork) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := time.NewTimer(s.draw())
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	if s.done != nil {
		s.done(r)
	}
	w.WriteHeader(http.StatusOK)
}

// callCounts are the client side's counts of one group in one phase.
type callCounts struct {
	calls, ok, refused atomic.Int64
}

func runBadHostPolicy(ctx context.Context, o *BadHostOptions, m *sim.HostsModel, p sim.HostsPolicy, start time.Time, sched []openCall) (BadHostRow, error) {
	row := BadHostRow{Policy: p}
	counts := make([]hostCounts, m.Hosts)
	var urls []string
	for h := range m.Hosts {
		rules := faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100 * m.FailProb, Status: http.StatusInternalServerError}}
		if h == m.Down {
			rules.Outages = []faultinject.Window{{Start: m.DownFrom, End: m.DownTo, Status: http.StatusServiceUnavailable}}
		}
		inj := faultinject.New(faultinject.Config{Rules: rules, Seed: o.Seed + uint64(h), Epoch: start})
		work := &serviceWork{rng: rand.New(rand.NewPCG(o.Seed, 0xb4d0+uint64(h))), min: 5 * time.Millisecond, max: 15 * time.Millisecond,
			done: func(r *http.Request) {
				if v, ok := r.Context().Value(badHostPhaseKey{}).([2]int); ok && v[1] == 1 {
					counts[h].firstOK[v[0]].Add(1)
				}
			}}
		srv, err := serveLoopback(&badHostHandler{counts: &counts[h], next: inj.Handler(work)})
		if err != nil {
			return row, err
		}
		defer srv.close()
		defer inj.Close() // first: nothing held when the server shuts down
		urls = append(urls, srv.url)
	}
	base := &http.Transport{Proxy: nil, MaxIdleConns: 0, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	defer base.CloseIdleConnections()
	clients := make([]*http.Client, o.Clients)
	for c := range clients {
		rp, err := badHostRetryPolicy(p, o.Seed, c)
		if err != nil {
			return row, err
		}
		clients[c] = &http.Client{Transport: httpretry.New(base, rp, httpretry.WithRetry500(), httpretry.WithKey(httpretry.HostKey))}
	}
	var calls [2][phases]callCounts // healthy, bad
	phase := func(at time.Duration) int {
		switch {
		case at < m.DownFrom:
			return phaseBefore
		case at < m.DownTo:
			return phaseOutage
		}
		return phaseAfter
	}
	row.StartLagMax = runOpenLoop(ctx, start, sched, func(c openCall) {
		h := badHostOf(o.Seed, c, m.Hosts)
		ph := phase(c.At)
		g := 0
		if h == m.Down {
			g = 1
		}
		cc := &calls[g][ph]
		cc.calls.Add(1)
		ok, refused := badHostCall(ctx, o.CallTimeout, clients[c.Client], urls[h], ph)
		if ok {
			cc.ok.Add(1)
		}
		if refused {
			cc.refused.Add(1)
		}
	})
	if err := ctx.Err(); err != nil {
		return row, err
	}
	group := func(g, ph int) sim.HostGroupStats {
		var s sim.HostGroupStats
		cc := &calls[g][ph]
		s.Calls, s.Succeeded, s.Refused = float64(cc.calls.Load()), float64(cc.ok.Load()), float64(cc.refused.Load())
		var firstOK float64
		for h := range counts {
			if (h == m.Down) != (g == 1) {
				continue
			}
			s.Attempts += float64(counts[h].attempts[ph].Load())
			s.Retries += float64(counts[h].retries[ph].Load())
			firstOK += float64(counts[h].firstOK[ph].Load())
		}
		s.FirstFailed = max(0, s.Calls-firstOK)
		return s
	}
	row.Healthy, row.Bad = group(0, phaseOutage), group(1, phaseOutage)
	row.HealthyBefore, row.BadBefore = group(0, phaseBefore), group(1, phaseBefore)
	row.HealthyGoodput = row.Healthy.Succeeded / (m.DownTo - m.DownFrom).Seconds()
	row.HealthyGoodputBefore = row.HealthyBefore.Succeeded / m.DownFrom.Seconds()
	p1, p2 := row.Healthy.Success(), row.HealthyBefore.Success()
	row.HealthySuccessSE = math.Sqrt(p1*(1-p1)/math.Max(row.Healthy.Calls, 1) + p2*(1-p2)/math.Max(row.HealthyBefore.Calls, 1))
	return row, nil
}

// badHostOf draws the host of a call from the seed, the client and the
// call's time alone, so that every policy sends the same call to the
// same host.
func badHostOf(seed uint64, c openCall, hosts int) int {
	x := seed ^ uint64(c.Client)<<40 ^ uint64(c.At)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(hosts))
}

// badHostRetryPolicy is client c's retry.Policy for p, on the real clock:
// sim.RunHosts's policy (full jitter, the breaker or budget shared by
// every host or keyed per host).
func badHostRetryPolicy(p sim.HostsPolicy, seed uint64, c int) (*retry.Policy, error) {
	rp := &retry.Policy{
		Operation:   BadHostScenario,
		MaxAttempts: p.MaxAttempts,
		Backoff:     backoff.Exponential{Base: p.Base, Max: p.Max, Jitter: backoff.Full, Rand: rand.NewPCG(seed, uint64(c)+1)},
	}
	if p.Breaker != nil {
		bc := *p.Breaker
		bc.Rand = rand.NewPCG(seed, uint64(c)+0x1000)
		if p.PerHostBreaker {
			g, err := keyed.NewBreakers(keyed.Config{}, bc)
			if err != nil {
				return nil, err
			}
			rp.Breaker = g
		} else {
			rp.Breaker = breaker.New(bc)
		}
	}
	if p.Budget != nil {
		bc := *p.Budget
		if p.PerHostBudget {
			g, err := keyed.NewBudgets(keyed.Config{}, func() retry.Budget { return budget.NewRatio(bc) })
			if err != nil {
				return nil, err
			}
			rp.Budget = g
		} else {
			rp.Budget = budget.NewRatio(bc)
		}
	}
	return rp, nil
}

// badHostCall makes one call: whether it was answered 200, and whether
// the breaker stopped it.
func badHostCall(ctx context.Context, timeout time.Duration, client *http.Client, url string, phase int) (ok, refused bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, false
	}
	req.Header.Set(badHostPhaseHeader, strconv.Itoa(phase))
	resp, err := client.Do(req)
	if err != nil {
		return false, errors.Is(err, breaker.ErrOpen)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, false
}

// BadHostTitle is the title of RunBadHost's table.
const BadHostTitle = "Live one bad host among ten"

// Table renders the report as a sim.Table (its WriteTo prints it).
func (r *BadHostReport) Table() sim.Table {
	m := r.Model
	t := sim.Table{
		Title: fmt.Sprintf("%s: %d client(s) at %g calls/s to %d hosts, host 0 down (503) from %s to %s of %s",
			BadHostTitle, r.Options.Clients, r.Options.Rate, m.Hosts, roundDur(m.DownFrom), roundDur(m.DownTo), roundDur(m.Duration)),
		Header: []string{"policy", "healthy success", "before", "healthy goodput", "before", "healthy retries/failure", "before",
			"bad success", "bad att/call", "bad refused", "virtual healthy success", "no fault", "virtual retries/failure", "virtual bad att/call", "lag"},
		Notes: []string{
			"live: over the outage, for the calls started in it; before: the calls started before it, in the same run (the live no-fault level); ! marks a healthy success more than 3 standard errors below it (the noise floor)",
			"retries/failure: retries on the wire per call whose first attempt failed (or was refused); bad refused: calls to host 0 the breaker stopped",
			"virtual: sim.RunHosts at the same parameters and seed (no fault: the same model with no host down)",
			"lag: how late the clients started a call against their schedule at worst (a check on the harness)",
		},
	}
	if r.Options.Scale != 1 {
		for _, row := range r.Rows {
			if b := row.Policy.Breaker; b != nil {
				t.Notes = append(t.Notes, fmt.Sprintf("the timeline is sim's scaled by %g: the breakers' window is %s and their open period %s", r.Options.Scale, roundDur(b.Window.Duration), roundDur(b.OpenTimeout)))
				break
			}
		}
	}
	for _, row := range r.Rows {
		mark := ""
		if !row.HealthyWithinNoise() {
			mark = " !"
		}
		v, vn := row.Virtual, row.VirtualNoFault
		t.Rows = append(t.Rows, []string{row.Policy.Name,
			sim.FormatShare(row.Healthy.Success()) + mark, sim.FormatShare(row.HealthyBefore.Success()),
			fmt.Sprintf("%.0f/s", row.HealthyGoodput), fmt.Sprintf("%.0f/s", row.HealthyGoodputBefore),
			fmt.Sprintf("%.2f", row.Healthy.RetriesPerFailure()), fmt.Sprintf("%.2f", row.HealthyBefore.RetriesPerFailure()),
			sim.FormatShare(row.Bad.Success()), fmt.Sprintf("%.2f", row.Bad.AttemptsPerCall()), fmt.Sprintf("%.0f", row.Bad.Refused),
			sim.FormatShare(v.Healthy.Success()), sim.FormatShare(vn.Healthy.Success()),
			fmt.Sprintf("%.2f", v.Healthy.RetriesPerFailure()), fmt.Sprintf("%.2f", v.Bad.AttemptsPerCall()),
			row.StartLagMax.Round(time.Millisecond).String()})
	}
	return t
}

// WriteTo prints the report's table to w.
func (r *BadHostReport) WriteTo(w io.Writer) (int64, error) { return r.Table().WriteTo(w) }

// Verdict states, from the figures, which policies kept the healthy hosts
// at their no-fault success, how many retries the budgets left them, and
// how far the virtual run agrees.
func (r *BadHostReport) Verdict() string {
	var kept, lost []string
	for _, row := range r.Rows {
		s := fmt.Sprintf("%s (%s against %s before)", row.Policy.Name, sim.FormatShare(row.Healthy.Success()), sim.FormatShare(row.HealthyBefore.Success()))
		if row.HealthyWithinNoise() {
			kept = append(kept, s)
		} else {
			lost = append(lost, s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "live, host 0 down for %s: ", roundDur(r.Model.DownTo-r.Model.DownFrom))
	if len(kept) > 0 {
		fmt.Fprintf(&b, "the healthy hosts keep their no-fault success within the noise floor under %s", strings.Join(kept, ", "))
	}
	if len(lost) > 0 {
		if len(kept) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "they lose it under %s", strings.Join(lost, ", "))
	}
	for _, row := range r.Rows {
		if row.Policy.Breaker != nil && row.Policy.PerHostBreaker {
			fmt.Fprintf(&b, "; %s isolates host 0 at %.2f attempts per call (%.0f calls refused)", row.Policy.Name, row.Bad.AttemptsPerCall(), row.Bad.Refused)
		}
		if row.Policy.Budget != nil {
			fmt.Fprintf(&b, "; %s grants the healthy hosts %.2f retries per failed first try (%.2f before the outage; virtual %.2f)",
				row.Policy.Name, row.Healthy.RetriesPerFailure(), row.HealthyBefore.RetriesPerFailure(), row.Virtual.Healthy.RetriesPerFailure())
		}
	}
	var far []string
	for _, row := range r.Rows {
		l, v := row.Healthy.Success(), row.Virtual.Healthy.Success()
		if math.Abs(l-v) > 0.2*math.Max(v, 0.01) {
			far = append(far, fmt.Sprintf("%s (%s live, %s virtual)", row.Policy.Name, sim.FormatShare(l), sim.FormatShare(v)))
		}
	}
	if len(far) == 0 {
		b.WriteString(". Every healthy success is within 20% of the virtual run's at the same parameters.")
	} else {
		fmt.Fprintf(&b, ". The healthy success differs from the virtual run's by more than 20%% under %s.", strings.Join(far, ", "))
	}
	return b.String()
}

// Sim returns the report as a sim.Report for the stormsim command's
// printers and HTML page: its table, its verdict and the policies'
// legend.
func (r *BadHostReport) Sim() *sim.Report {
	t := r.Table()
	rep := &sim.Report{
		Scenario: "live:" + BadHostScenario, ModelVersion: sim.ModelVersion, Title: t.Title, Seed: r.Options.Seed, Trials: 1,
		Description: "Ten real loopback servers (faultinject: 5% of requests answered 500, host 0 answering 503 while it is down) and one client fleet calling them through httpretry with the breaker or the budget shared by every host or one per host (keyed, by httpretry.HostKey), beside sim.RunHosts at the same parameters.",
		Tables:      []sim.Table{t},
		Verdict:     []string{r.Verdict()},
		Cases:       []sim.Case{{Name: "host 0 down", FaultStartS: r.Model.DownFrom.Seconds(), FaultEndS: r.Model.DownTo.Seconds(), TrafficEndS: r.Model.Duration.Seconds()}},
	}
	for _, row := range r.Rows {
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{row.Policy.Name, row.Policy.Doc})
		rep.Cases[0].Rows = append(rep.Cases[0].Rows, sim.Row{Policy: row.Policy.Name})
	}
	return rep
}

// MarshalJSON encodes the report as sim's reports are: snake_case keys,
// durations in seconds, and "scenario": "bad-host".
func (r *BadHostReport) MarshalJSON() ([]byte, error) {
	type group struct {
		Calls             float64 `json:"calls"`
		Succeeded         float64 `json:"succeeded"`
		Attempts          float64 `json:"attempts"`
		Retries           float64 `json:"retries"`
		FirstFailed       float64 `json:"first_failed"`
		Refused           float64 `json:"refused"`
		Success           float64 `json:"success"`
		RetriesPerFailure float64 `json:"retries_per_failure"`
		AttemptsPerCall   float64 `json:"attempts_per_call"`
	}
	g := func(s sim.HostGroupStats) group {
		return group{s.Calls, s.Succeeded, s.Attempts, s.Retries, s.FirstFailed, s.Refused, s.Success(), s.RetriesPerFailure(), s.AttemptsPerCall()}
	}
	type result struct {
		Healthy        group   `json:"healthy"`
		Bad            group   `json:"bad"`
		HealthyGoodput float64 `json:"healthy_goodput_per_s"`
	}
	type row struct {
		Policy               string  `json:"policy"`
		Doc                  string  `json:"doc"`
		Healthy              group   `json:"healthy"`
		Bad                  group   `json:"bad"`
		HealthyBefore        group   `json:"healthy_before"`
		BadBefore            group   `json:"bad_before"`
		HealthyGoodput       float64 `json:"healthy_goodput_per_s"`
		HealthyGoodputBefore float64 `json:"healthy_goodput_before_per_s"`
		HealthySuccessSE     float64 `json:"healthy_success_se"`
		WithinNoise          bool    `json:"healthy_within_noise"`
		Virtual              result  `json:"virtual"`
		VirtualNoFault       result  `json:"virtual_no_fault"`
		StartLagMaxS         float64 `json:"start_lag_max_s"`
	}
	m := r.Model
	out := struct {
		Scenario     string   `json:"scenario"`
		Title        string   `json:"title"`
		Seed         uint64   `json:"seed"`
		Clients      int      `json:"clients"`
		RatePerS     float64  `json:"rate_per_s"`
		Scale        float64  `json:"scale"`
		Hosts        int      `json:"hosts"`
		DurationS    float64  `json:"duration_s"`
		FaultStartS  float64  `json:"fault_start_s"`
		FaultEndS    float64  `json:"fault_end_s"`
		CallTimeoutS float64  `json:"call_timeout_s"`
		Sequential   bool     `json:"sequential"`
		ElapsedS     float64  `json:"elapsed_s"`
		Verdict      []string `json:"verdict"`
		Rows         []row    `json:"rows"`
	}{
		Scenario: BadHostScenario, Title: r.Table().Title, Seed: r.Options.Seed, Clients: r.Options.Clients, RatePerS: r.Options.Rate,
		Scale: r.Options.Scale, Hosts: m.Hosts, DurationS: m.Duration.Seconds(), FaultStartS: m.DownFrom.Seconds(), FaultEndS: m.DownTo.Seconds(),
		CallTimeoutS: r.Options.CallTimeout.Seconds(), Sequential: r.Options.Sequential, ElapsedS: r.ElapsedS,
		Verdict: []string{r.Verdict()}, Rows: []row{},
	}
	for _, rw := range r.Rows {
		out.Rows = append(out.Rows, row{
			Policy: rw.Policy.Name, Doc: rw.Policy.Doc, Healthy: g(rw.Healthy), Bad: g(rw.Bad),
			HealthyBefore: g(rw.HealthyBefore), BadBefore: g(rw.BadBefore),
			HealthyGoodput: rw.HealthyGoodput, HealthyGoodputBefore: rw.HealthyGoodputBefore,
			HealthySuccessSE: rw.HealthySuccessSE, WithinNoise: rw.HealthyWithinNoise(),
			Virtual:        result{g(rw.Virtual.Healthy), g(rw.Virtual.Bad), rw.Virtual.HealthyGoodput},
			VirtualNoFault: result{g(rw.VirtualNoFault.Healthy), g(rw.VirtualNoFault.Bad), rw.VirtualNoFault.HealthyGoodput},
			StartLagMaxS:   rw.StartLagMax.Seconds(),
		})
	}
	return json.Marshal(out)
}
