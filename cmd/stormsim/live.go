package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// liveStableClients is the client count below which a live run warns
// that its figures are not stable from run to run.
const liveStableClients = 200

// runLive is "stormsim live": each named live run (every one when none is
// named: the registry's scenarios, then cascade and slowdown-hedging; the
// runs marked byName only when named) runs
// on real loopback traffic, its tables printed as they come, then the
// JSON or the --out report. A cancelled run writes what finished.
func runLive(ctx context.Context, cfg *config, stdout, stderr io.Writer, tty bool) int {
	runs, err := pickLiveRuns(cfg.scenarios)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	named := len(cfg.scenarios) > 0
	lists, err := liveRunPolicies(cfg.policies, runs)
	if err != nil {
		fmt.Fprintf(stderr, "stormsim live: %v\n", err)
		return exitUsage
	}
	for i, r := range runs {
		if cfg.policies != "" && len(lists[i]) == 0 {
			if named {
				fmt.Fprintf(stderr, "stormsim live: %v: none of %q applies to %s (its policies: %s)\n", sim.ErrPolicy, cfg.policies, r.name(), strings.Join(r.policyNames(), ", "))
				return exitUsage
			}
		}
		if r.topology != nil && cfg.ignoreCancel && !r.topology.ignoreCancel && named {
			fmt.Fprintf(stderr, "stormsim live: --ignore-cancel does not apply to %s: %s\n", r.name(), r.topology.noIgnoreCancel)
			return exitUsage
		}
	}

	var (
		sims   []*sim.Report
		data   []any
		legend []*live.Report
	)
	began := time.Now()
	finish := func(code int) int {
		set := reportSet{Reports: sims, Data: data, Live: true, Legend: liveLegend(legend)}
		if c := emit(cfg, set, len(legend) > 0, stdout, stderr); c != exitOK {
			return c
		}
		return code
	}
	for i, r := range runs {
		if cfg.policies != "" && len(lists[i]) == 0 {
			fmt.Fprintf(stderr, "stormsim live: skipping %s: none of the policies %q applies to it\n", r.name(), cfg.policies)
			continue
		}
		var code int
		if r.topology != nil {
			if cfg.ignoreCancel && !r.topology.ignoreCancel {
				fmt.Fprintf(stderr, "stormsim live: %s: --ignore-cancel does not apply: %s\n", r.name(), r.topology.noIgnoreCancel)
			}
			var rep liveTopologyReport
			rep, code = runLiveTopology(ctx, cfg, r.topology, lists[i], stdout, stderr)
			if rep != nil {
				sims, data = append(sims, rep.Sim()), append(data, rep)
			}
		} else {
			var rep *live.Report
			rep, code = runLiveScenario(ctx, cfg, r.scenario, lists[i], stdout, stderr, tty)
			if rep != nil {
				sims, data, legend = append(sims, rep.Sim()), append(data, rep), append(legend, rep)
			}
		}
		if code != exitOK {
			if code == exitError && ctx.Err() != nil && len(data) > 0 {
				// Cancelled: write what finished, in every format asked for.
				fmt.Fprintf(stderr, "stormsim live: partial report: %d of %d runs finished before the run was cancelled\n", len(data), len(runs))
				return finish(code)
			}
			return code
		}
	}
	if code := finish(exitOK); code != exitOK {
		return code
	}
	if !cfg.quiet {
		fmt.Fprintf(stderr, "stormsim live: %d scenario(s) in %.1fs\n", len(data), time.Since(began).Seconds())
	}
	return exitOK
}

// runLiveScenario runs one of the registry's live scenarios and prints
// its tables and notes.
func runLiveScenario(ctx context.Context, cfg *config, sc live.Scenario, policies []string, stdout, stderr io.Writer, tty bool) (*live.Report, int) {
	sc.Server.IgnoreCancel = cfg.ignoreCancel
	o := live.Options{
		Seed: cfg.seed, Clients: cfg.clients, Duration: cfg.duration, Policies: policies,
		Scope: cfg.scope, Sequential: cfg.sequential,
	}
	if cfg.clients > live.DefaultMaxClients {
		o.MaxClients = cfg.clients // asked for on the command line; at most live.MaxClientsLimit
	}
	bar := newProgress(stderr, tty && !cfg.quiet, sc.Name)
	o.Progress = bar.update
	rep, err := live.Run(ctx, sc, o)
	bar.finish()
	if err != nil {
		fmt.Fprintf(stderr, "stormsim live: %s: %v\n", sc.Name, err)
		if errors.Is(err, live.ErrScenario) || errors.Is(err, sim.ErrPolicy) {
			return nil, exitUsage
		}
		return nil, exitError
	}
	if !cfg.json {
		for _, t := range rep.Tables {
			writeTable(stdout, t)
		}
		writeSummary(stdout, rep.Verdict, rep.PolicyLegend)
	}
	if rep.FaultEndS > rep.DurationS {
		fmt.Fprintf(stderr, "stormsim live: %s: note: the faults (%gs to %gs) do not end within the %gs of traffic, so recovery cannot be judged\n",
			sc.Name, rep.FaultStartS, rep.FaultEndS, rep.DurationS)
	}
	if rep.Clients < liveStableClients {
		fmt.Fprintf(stderr, "stormsim live: %s: warning: %d clients is a small scale: peaks and recovery move by tens of percent from run to run below about %d (the shared-budget peak of gateway-restart read 1.07x at 500 clients and 1.35x at 50)\n",
			sc.Name, rep.Clients, liveStableClients)
	}
	if lag := worstLag(rep); lag >= live.LagWarning {
		warnLag(stderr, sc.Name, lag)
	}
	if !cfg.quiet {
		fmt.Fprintf(stderr, "stormsim live: %s: %d policies, %d clients, %gs of traffic in %.1fs of wall time\n",
			sc.Name, len(rep.Rows), rep.Clients, rep.DurationS, rep.ElapsedS)
	}
	return rep, exitOK
}

func warnLag(stderr io.Writer, name string, lag time.Duration) {
	fmt.Fprintf(stderr, "stormsim live: %s: warning: clients started calls up to %s late; the machine did not keep up and the peaks may be the harness catching up (try --sequential, fewer --clients or a quieter machine)\n",
		name, lag.Round(time.Millisecond))
}

// liveRun is one run of "stormsim live": a scenario of the registry, or
// one of the runs with a topology of their own.
type liveRun struct {
	scenario live.Scenario
	topology *liveTopology
}

func (r liveRun) name() string {
	if r.topology != nil {
		return r.topology.name
	}
	return r.scenario.Name
}

// policyNames returns the policies the run compares by default.
func (r liveRun) policyNames() []string {
	if r.topology != nil {
		return r.topology.policies()
	}
	if len(r.scenario.Policies) > 0 {
		return r.scenario.Policies
	}
	return live.DefaultPolicies()
}

// knows reports whether the run has a policy called name (or an alias).
func (r liveRun) knows(name string) bool {
	if r.topology != nil {
		return slices.Contains(r.topology.policies(), name)
	}
	return r.scenario.KnownPolicy(name)
}

// liveTopology is a live run whose topology is not one server.
type liveTopology struct {
	name, title, doc string
	policies         func() []string
	// ignoreCancel says whether --ignore-cancel applies; noIgnoreCancel
	// says why not.
	ignoreCancel   bool
	noIgnoreCancel string
	// byName keeps the run out of "stormsim live" with no name, as sim's
	// named scenarios are kept out of its default suite.
	byName bool
	// run, when set, runs it (cascade and slowdown-hedging are run by
	// runLiveTopology itself) and returns its report and worst start lag.
	run func(ctx context.Context, cfg *config, policies []string) (liveTopologyReport, time.Duration, error)
}

// liveTopologies are the live runs outside live's Scenario registry.
var liveTopologies = []*liveTopology{
	{
		name:  live.CascadeScenario,
		title: "retry at one layer: sim's cascade (total case) on three real tiers behind layer.Middleware over a failing bottom tier (live.RunCascade)",
		doc: `Callers (20 by default) each start a call every 100ms on an open-loop schedule drawn from the seed, for 3s;
the bottom tier fails every request in the middle third. Every client makes up to 4 attempts. The table gives
the requests per call at every tier during the outage, and success over the same scheduled calls for every
policy (comparable across rows).`,
		policies: func() []string {
			var out []string
			for _, p := range live.CascadePolicies() {
				out = append(out, p.Name)
			}
			return out
		},
		noIgnoreCancel: "its tiers answer at once and hold no work to waste (it applies to gateway-restart, slow-downstream and slowdown-hedging)",
	},
	{
		name:  live.SlowdownHedgingScenario,
		title: "hedging in a slowdown: hedge.Transport with and without a shared 10% budget (live.RunSlowdownHedging; not sim's brownout)",
		doc: `A server slows from 5ms to 100ms for everyone in the middle third of a 3s run; open-loop clients (20 by
default, each calling every 100ms from a phase drawn from the seed) hedge once after 25ms. The table gives the
requests per call before and during the slowdown, the losers cancelled and, with --ignore-cancel, the work the
server wastes on them. Not sim's brownout, which is a capacity loss fought with retry limiters.`,
		policies: func() []string {
			var out []string
			for _, p := range live.SlowdownHedgingPolicies() {
				out = append(out, p.Name)
			}
			return out
		},
		ignoreCancel: true,
	},
}

// liveNames returns the names "stormsim live" takes.
func liveNames() []string {
	names := live.Names()
	for _, t := range liveTopologies {
		names = append(names, t.name)
	}
	return names
}

// pickLiveRuns returns the named live runs, or every one.
func pickLiveRuns(names []string) ([]liveRun, error) {
	if len(names) == 0 {
		names = live.Names()
		for _, t := range liveTopologies {
			if !t.byName {
				names = append(names, t.name)
			}
		}
	}
	var out []liveRun
	for _, name := range names {
		if sc, ok := live.Lookup(name); ok {
			out = append(out, liveRun{scenario: sc})
			continue
		}
		i := slices.IndexFunc(liveTopologies, func(t *liveTopology) bool { return t.name == name })
		if i >= 0 {
			out = append(out, liveRun{topology: liveTopologies[i]})
			continue
		}
		if name == "brownout" {
			return nil, fmt.Errorf("stormsim live: no live scenario %q: sim's brownout (a capacity loss fought with retry limiters) has no live run; the live run of hedging in a slowdown is %s", name, live.SlowdownHedgingScenario)
		}
		return nil, fmt.Errorf("stormsim live: no live scenario %q (have: %s; see stormsim list)", name, strings.Join(liveNames(), ", "))
	}
	return out, nil
}

// liveRunPolicies reads --policies for live runs: names (or aliases, such
// as naive for immediate) that at least one of the runs knows, or "all"
// for each run's every policy (the standard policies for a scenario of
// the registry). It returns each run's names, nil for all when --policies
// is not given; a run that knows none of them gets an empty list.
func liveRunPolicies(raw string, runs []liveRun) ([][]string, error) {
	lists := make([][]string, len(runs))
	if strings.TrimSpace(raw) == "" {
		return lists, nil
	}
	var names []string
	for _, f := range strings.Split(raw, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case strings.EqualFold(f, "all"):
			f = "all"
		case !slices.ContainsFunc(runs, func(r liveRun) bool { return r.knows(f) }):
			var known []string
			for _, r := range runs {
				for _, n := range r.policyNames() {
					if !slices.Contains(known, n) {
						known = append(known, n)
					}
				}
			}
			return nil, fmt.Errorf("%w: unknown policy %q (known to %s: %s; \"all\" for every one)", sim.ErrPolicy, f, runNames(runs), strings.Join(known, ", "))
		}
		names = append(names, f)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: empty policy list", sim.ErrPolicy)
	}
	for i, r := range runs {
		var mine []string
		for _, n := range names {
			if n == "all" || r.knows(n) {
				mine = append(mine, n)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if r.topology != nil {
			for _, p := range r.topology.policies() {
				if slices.Contains(mine, "all") || slices.Contains(mine, p) {
					lists[i] = append(lists[i], p)
				}
			}
			continue
		}
		l, err := sim.ParsePolicyList(strings.Join(mine, ","), r.scenario.KnownPolicy)
		if err != nil {
			return nil, err
		}
		lists[i] = l
	}
	return lists, nil
}

func runNames(runs []liveRun) string {
	var out []string
	for _, r := range runs {
		out = append(out, r.name())
	}
	return strings.Join(out, ", ")
}

// worstLag returns how late, at worst, a run's clients started a call.
func worstLag(rep *live.Report) time.Duration {
	var worst float64
	for _, row := range rep.Rows {
		worst = max(worst, row.Extra.StartLagMaxMS)
	}
	return time.Duration(worst * float64(time.Millisecond))
}

// liveLegend explains the columns of the live tables: sim's columns that
// the tables show, then live's.
func liveLegend(reports []*live.Report) [][2]string {
	shown := map[string]bool{}
	for _, rep := range reports {
		for _, t := range rep.Tables {
			for _, h := range t.Header {
				shown[h] = true
			}
		}
	}
	var out [][2]string
	for _, l := range sim.ColumnLegend() {
		for _, h := range strings.Fields(l[0]) {
			if shown[h] {
				out = append(out, l)
				break
			}
		}
	}
	return append(out, live.Legend()...)
}

// liveTopologyReport is what a topology run reports.
type liveTopologyReport interface {
	Table() sim.Table
	Sim() *sim.Report
}

// runLiveTopology runs cascade (live.RunCascade) or slowdown-hedging
// (live.RunSlowdownHedging) with the command's options: --clients, --duration
// (0 keeps their defaults), --seed, --scope, --sequential, --policies and,
// for slowdown-hedging, --ignore-cancel; it prints the table and the
// policies' legend unless --json.
func runLiveTopology(ctx context.Context, cfg *config, t *liveTopology, policies []string, stdout, stderr io.Writer) (liveTopologyReport, int) {
	var rep liveTopologyReport
	var err error
	began := time.Now()
	var lag time.Duration
	switch {
	case t.run != nil:
		rep, lag, err = t.run(ctx, cfg, policies)
	case t.name == live.CascadeScenario:
		o := live.CascadeOptions{Clients: cfg.clients, Duration: cfg.duration, Seed: cfg.seed, Scope: cfg.scope, Sequential: cfg.sequential}
		for _, p := range live.CascadePolicies() {
			if policies == nil || slices.Contains(policies, p.Name) {
				o.Policies = append(o.Policies, p)
			}
		}
		var r *live.CascadeReport
		if r, err = live.RunCascade(ctx, o); err == nil {
			rep = r
			for _, row := range r.Rows {
				lag = max(lag, row.StartLagMax)
			}
		}
	default:
		o := live.SlowdownHedgingOptions{Clients: cfg.clients, Duration: cfg.duration, Seed: cfg.seed, Scope: cfg.scope,
			Sequential: cfg.sequential, IgnoreCancel: cfg.ignoreCancel}
		for _, p := range live.SlowdownHedgingPolicies() {
			if policies == nil || slices.Contains(policies, p.Name) {
				o.Policies = append(o.Policies, p)
			}
		}
		var r *live.SlowdownHedgingReport
		if r, err = live.RunSlowdownHedging(ctx, o); err == nil {
			rep = r
			for _, row := range r.Rows {
				lag = max(lag, row.StartLagMax)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "stormsim live: %s: %v\n", t.name, err)
		if errors.Is(err, live.ErrScenario) {
			return nil, exitUsage
		}
		return nil, exitError
	}
	if !cfg.json {
		s := rep.Sim()
		for _, tb := range s.Tables {
			writeTable(stdout, tb)
		}
		writeSummary(stdout, s.Verdict, s.PolicyLegend)
	}
	if lag >= live.LagWarning {
		warnLag(stderr, t.name, lag)
	}
	if !cfg.quiet {
		fmt.Fprintf(stderr, "stormsim live: %s: %.1fs of wall time\n", t.name, time.Since(began).Seconds())
	}
	return rep, exitOK
}

func listLiveScenarios(w io.Writer) {
	fmt.Fprintf(w, "\nLive scenarios (stormsim live NAME: real HTTP traffic on 127.0.0.1):\n\n")
	for _, sc := range live.Scenarios() {
		policies := sc.Policies
		if len(policies) == 0 {
			policies = live.DefaultPolicies()
		}
		fmt.Fprintf(w, "%-16s %s\n", sc.Name, sc.Title)
		fmt.Fprintf(w, "%-16s policies: %s; %d clients, %s\n\n", "", strings.Join(policies, ", "), sc.Clients, sc.Duration)
		for _, line := range strings.Split(sc.Doc, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
		fmt.Fprintln(w)
	}
	for _, t := range liveTopologies {
		fmt.Fprintf(w, "%-16s %s\n", t.name, t.title)
		fmt.Fprintf(w, "%-16s policies: %s\n\n", "", strings.Join(t.policies(), ", "))
		for _, line := range strings.Split(t.doc, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
		fmt.Fprintln(w)
	}
}
