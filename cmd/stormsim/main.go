// Command stormsim is stormguard's storm lab: it runs retry-storm scenarios
// in virtual time and compares, side by side, what each retry policy does
// to a struggling server.
//
//	stormsim                      # the default suite, a table per scenario
//	stormsim list                 # the scenarios and what they model
//	stormsim live gateway-restart # the same comparison on real HTTP traffic on 127.0.0.1
//	stormsim live cascade         # three real tiers; also slowdown-hedging (hedge.Transport)
//	stormsim metastable cascade   # some scenarios
//	stormsim --file my.yaml       # a scenario of your own
//	stormsim --out report/        # plus an HTML report with charts (--png: PNG files too)
//	stormsim --json               # JSON for machines
//
// Every virtual run is deterministic: the same --seed gives the same
// numbers and the same JSON bytes. See the sim package for the models and
// metrics, and the live package for live runs (real time: their schedule
// is reproducible, the machine's timing is not).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// run is the command; tty says whether stderr is a terminal (for the
// progress bar).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	if len(args) > 0 && args[0] == "check" {
		return simtest.MainContext(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	if cfg.list {
		listScenarios(stdout)
		listLiveScenarios(stdout)
		return exitOK
	}
	if cfg.live {
		return runLive(ctx, cfg, stdout, stderr, tty)
	}
	scenarios, err := pickScenarios(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}

	named := len(cfg.scenarios) > 0 || len(cfg.files) > 0
	lists, skipped, err := resolvePolicies(cfg.policies, scenarios, named)
	if err != nil {
		fmt.Fprintf(stderr, "stormsim: %v\n", err)
		return exitUsage
	}
	for _, name := range skipped {
		fmt.Fprintf(stderr, "stormsim: skipping %s: none of the policies %q applies to it\n", name, cfg.policies)
	}

	var reports []*sim.Report
	var events uint64
	began := time.Now()
	runs := runAhead(ctx, cfg, scenarios, lists, stderr, tty && !cfg.quiet)
	defer runs.stop()
	for i, sc := range scenarios {
		out, ok := runs.wait(i)
		if !ok {
			continue
		}
		rep, err := out.rep, out.err
		if errors.Is(err, sim.ErrIgnoredOption) && len(cfg.scenarios) == 0 && len(cfg.files) == 0 {
			// The default suite: an option meant for the other scenarios.
			fmt.Fprintf(stderr, "stormsim: %s: skipped: %v\n", sc.Name, err)
			continue
		}
		if err != nil && rep != nil && rep.Partial && !cfg.json {
			// Cancelled: show what the finished trials measured, marked.
			for _, t := range rep.Tables {
				writeTable(stdout, t)
			}
			fmt.Fprintf(stderr, "stormsim: %s: partial report: %d trials finished before the run was cancelled\n", sc.Name, rep.TrialsDone)
		}
		if err != nil {
			fmt.Fprintf(stderr, "stormsim: %s: %v\n", sc.Name, err)
			if ctx.Err() != nil {
				// Cancelled: the scenarios that finished and this one's
				// partial report (its policies without a finished trial
				// marked not run), in every format asked for.
				if rep != nil && rep.Partial {
					reports = append(reports, rep)
				}
				if len(reports) > 0 {
					set := reportSet{Reports: reports, Data: reports, Legend: sim.ColumnLegend()}
					emit(cfg, set, hasModelTables(reports), stdout, stderr)
				}
				return exitError
			}
			if errors.Is(err, sim.ErrModel) || errors.Is(err, sim.ErrPolicy) || errors.Is(err, sim.ErrScenario) {
				return exitUsage
			}
			return exitError
		}
		events += rep.Events
		if !cfg.json {
			for _, t := range rep.Tables {
				writeTable(stdout, t)
			}
			writeSummary(stdout, rep.Verdict, rep.PolicyLegend)
		}
		if !cfg.quiet {
			el := out.elapsed
			fmt.Fprintf(stderr, "stormsim: %s: %d events in %.2fs (%.1fM events/s)\n", sc.Name, rep.Events, el.Seconds(), float64(rep.Events)/el.Seconds()/1e6)
		}
		reports = append(reports, rep)
	}
	set := reportSet{Reports: reports, Data: reports, Legend: sim.ColumnLegend()}
	if code := emit(cfg, set, hasModelTables(reports), stdout, stderr); code != exitOK {
		return code
	}
	if !cfg.quiet {
		el := time.Since(began)
		fmt.Fprintf(stderr, "stormsim: %d scenario(s), %d events in %.1fs (%.1fM events/s)\n", len(reports), events, el.Seconds(), float64(events)/el.Seconds()/1e6)
	}
	return exitOK
}

// pickScenarios returns the named scenarios and the file's, or the default
// suite when there are none.
func pickScenarios(cfg *config) ([]*sim.Scenario, error) {
	var out []*sim.Scenario
	for _, name := range cfg.scenarios {
		sc, ok := sim.Lookup(name)
		if !ok {
			var names []string
			for _, s := range sim.Scenarios() {
				names = append(names, s.Name)
			}
			return nil, fmt.Errorf("stormsim: no scenario %q (have: %s; see stormsim list)", name, strings.Join(names, ", "))
		}
		out = append(out, sc)
	}
	for _, file := range cfg.files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("stormsim: %w", err)
		}
		sc, err := parseScenarioFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		out = sim.Scenarios()
	}
	return out, nil
}

func listScenarios(w io.Writer) {
	for _, sc := range sim.Scenarios() {
		fmt.Fprintf(w, "%-16s %s\n", sc.Name, sc.Title)
		fmt.Fprintf(w, "%-16s policies: %s; %d trial(s) by default\n\n", "", strings.Join(sc.Policies, ", "), sc.Trials)
		for _, line := range strings.Split(sc.Doc, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Standard policies: %s\n", strings.Join(sim.PolicyNames(), ", "))
}

func hasModelTables(reports []*sim.Report) bool {
	for _, r := range reports {
		for _, c := range r.Cases {
			if len(c.Rows) > 0 && c.Rows[0].Metrics != nil {
				return true
			}
		}
	}
	return false
}

// emit prints the reports' JSON (--json) or, when legend is set, the
// legend of their tables, and writes the --out directory.
func emit(cfg *config, set reportSet, legend bool, stdout, stderr io.Writer) int {
	if cfg.json {
		b, err := encodeJSON(set.Data)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		if _, err := stdout.Write(b); err != nil {
			return exitError
		}
	} else if legend {
		writeLegend(stdout, set.Legend)
	}
	if cfg.out != "" {
		if err := writeOutDir(cfg.out, set, cfg.seed, cfg.png); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		if !cfg.quiet {
			fmt.Fprintf(stderr, "stormsim: wrote %s and %s\n", cfg.out+"/report.html", cfg.out+"/report.json")
		}
	}
	return exitOK
}

// writeLegend prints the explanations of table headers.
func writeLegend(w io.Writer, legend [][2]string) {
	fmt.Fprintln(w, "Columns:")
	for _, l := range legend {
		fmt.Fprintf(w, "  %-14s %s\n", l[0], l[1])
	}
}
