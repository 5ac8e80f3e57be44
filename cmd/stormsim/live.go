package main

import (
	"context"
	"encoding/json"
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

// runLive is "stormsim live": each named live scenario (every one when
// none is named) runs on real loopback traffic, its tables printed as they
// come, then the JSON or the --out report.
func runLive(ctx context.Context, cfg *config, stdout, stderr io.Writer, tty bool) int {
	if len(cfg.scenarios) == 1 && (cfg.scenarios[0] == "cascade" || cfg.scenarios[0] == "brownout") {
		return runLiveTopology(ctx, cfg, stdout, stderr)
	}
	scenarios, err := pickLiveScenarios(cfg.scenarios)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	policies, err := livePolicies(cfg.policies, scenarios)
	if err != nil {
		fmt.Fprintf(stderr, "stormsim live: %v\n", err)
		return exitUsage
	}

	var reports []*live.Report
	began := time.Now()
	for _, sc := range scenarios {
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
				return exitUsage
			}
			return exitError
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
			fmt.Fprintf(stderr, "stormsim live: %s: warning: clients started calls up to %s late; the machine did not keep up and the peaks may be the harness catching up (try --sequential, fewer --clients or a quieter machine)\n",
				sc.Name, lag.Round(time.Millisecond))
		}
		if !cfg.quiet {
			fmt.Fprintf(stderr, "stormsim live: %s: %d policies, %d clients, %gs of traffic in %.1fs of wall time\n",
				sc.Name, len(rep.Rows), rep.Clients, rep.DurationS, rep.ElapsedS)
		}
		reports = append(reports, rep)
	}

	sims := make([]*sim.Report, len(reports))
	for i, rep := range reports {
		sims[i] = rep.Sim()
	}
	set := reportSet{Reports: sims, Data: reports, Live: true, Legend: liveLegend(reports)}
	if code := emit(cfg, set, true, stdout, stderr); code != exitOK {
		return code
	}
	if !cfg.quiet {
		fmt.Fprintf(stderr, "stormsim live: %d scenario(s) in %.1fs\n", len(reports), time.Since(began).Seconds())
	}
	return exitOK
}

// pickLiveScenarios returns the named live scenarios, or every one.
func pickLiveScenarios(names []string) ([]live.Scenario, error) {
	if len(names) == 0 {
		return live.Scenarios(), nil
	}
	var out []live.Scenario
	for _, name := range names {
		sc, ok := live.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("stormsim live: no live scenario %q (have: %s; see stormsim list)", name, strings.Join(live.Names(), ", "))
		}
		out = append(out, sc)
	}
	return out, nil
}

// livePolicies reads --policies for live runs: names (or aliases, such as
// naive) that at least one of the scenarios knows, or "all" for every
// standard policy; nil for none (each scenario's own set).
func livePolicies(raw string, scenarios []live.Scenario) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	known := func(n string) bool {
		return slices.ContainsFunc(scenarios, func(sc live.Scenario) bool { return sc.KnownPolicy(n) })
	}
	return sim.ParsePolicyList(raw, known)
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

// runLiveTopology runs the live runs whose topology is not one server:
// "cascade" (three real tiers behind layer.Middleware, live.RunCascade)
// and "brownout" (hedging through hedge.Transport in a slowdown,
// live.RunBrownout). --clients and --duration apply; 0 keeps their
// defaults.
func runLiveTopology(ctx context.Context, cfg *config, stdout, stderr io.Writer) int {
	var t sim.Table
	var rep any
	var err error
	switch cfg.scenarios[0] {
	case "cascade":
		var r *live.CascadeReport
		r, err = live.RunCascade(ctx, live.CascadeOptions{Clients: cfg.clients, Duration: cfg.duration})
		if err == nil {
			t, rep = r.Table(), r
		}
	default:
		var r *live.BrownoutReport
		r, err = live.RunBrownout(ctx, live.BrownoutOptions{Clients: cfg.clients, Duration: cfg.duration})
		if err == nil {
			t, rep = r.Table(), r
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "stormsim live: %s: %v\n", cfg.scenarios[0], err)
		return exitError
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "stormsim live: %v\n", err)
			return exitError
		}
		return exitOK
	}
	writeTable(stdout, t)
	return exitOK
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
	fmt.Fprintf(w, "%-16s %s\n", "cascade", "retry at one layer: three real tiers behind layer.Middleware over a failing bottom tier (live.RunCascade)")
	fmt.Fprintf(w, "%-16s policies: naive, layer-rule, layer-rule+marker+budget; requests per call at every tier\n\n", "")
	fmt.Fprintf(w, "%-16s %s\n", "brownout", "hedging in a slowdown: hedge.Transport with and without a shared 10% budget (live.RunBrownout)")
	fmt.Fprintf(w, "%-16s policies: no-hedge, hedge, hedge+budget; requests per call before and during the slowdown\n\n", "")
}
