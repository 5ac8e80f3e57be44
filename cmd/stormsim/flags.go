package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// config is the parsed command line.
type config struct {
	list      bool     // "stormsim list"
	scenarios []string // named scenarios, in order
	files     []string // --file, repeatable
	clients   int
	duration  time.Duration
	seed      uint64
	trials    int
	policies  string // raw --policies, resolved per scenario
	out       string
	json      bool
	png       bool
	workers   int
	quiet     bool

	// "stormsim live": scenarios are live scenarios.
	live         bool
	scope        live.Scope
	sequential   bool
	ignoreCancel bool
	set          map[string]bool // the flags given
}

// errUsage is returned for a command line that cannot be used; the
// message has been printed with the usage.
var errUsage = errors.New("stormsim: bad usage")

const usageText = `Usage: stormsim [flags] [scenario ...]
       stormsim live [flags] [scenario ...]
       stormsim check [flags] policies.yaml
       stormsim list

Runs storm-lab scenarios in virtual time and prints, per scenario, a table
comparing retry policies on the same seeded workload. With no scenario it
runs the default suite (every built-in scenario).

"stormsim live" runs live scenarios instead: a real HTTP server on
127.0.0.1 with a capacity limit and the scenario's fault schedule, and real
client goroutines calling it through httpretry, once per policy (at the
same time unless --sequential); it reports the same metrics and charts,
measured on the wire, plus wasted work, duplicate executions and entry
traffic. "cascade" (three real tiers, sim's cascade in its total case) and
"slowdown-hedging" (hedge.Transport in a slowdown; not sim's brownout) are
live runs of their own. With no scenario it runs every live scenario, then
those two.

"stormsim check" judges a team's own policy file (the one the service
loads, through the same config loader) against a storm suite, and exits 1
when a policy fails a gate: see "stormsim check --help" and simtest/README.md.

Flags (before or after the scenario names; --trials, --workers and --file
are for virtual runs, --scope, --sequential and --ignore-cancel for live
ones):
`

// parseArgs reads the command line. Flags may come before or after the
// scenario names.
func parseArgs(args []string, stderr io.Writer) (*config, error) {
	c := &config{seed: 1}
	fs := flag.NewFlagSet("stormsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&c.clients, "clients", 0, "number of clients (0: each scenario's default; live: at most 10000)")
	fs.Func("duration", "how long clients start calls, a `duration` such as 90s or 2m (0: each scenario's default)", func(s string) error {
		d, err := parseDuration(s)
		c.duration = d
		return err
	})
	fs.Func("seed", "random `seed`: the same seed gives the same numbers (default 1)", func(s string) error {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 0, 64)
		if err != nil {
			return errors.New("seed must be an unsigned integer")
		}
		c.seed = v
		return nil
	})
	fs.IntVar(&c.trials, "trials", 0, "trials per case and policy (0: each scenario's default; aws-occ: 1000)")
	fs.StringVar(&c.policies, "policies", "", "comma-separated `list` of policies to compare, or \"all\" (default: each scenario's set)")
	fs.StringVar(&c.out, "out", "", "write report.html (tables and charts, self-contained), report.json and charts/*.svg into directory `DIR`")
	fs.BoolVar(&c.json, "json", false, "print the reports as JSON instead of tables")
	fs.BoolVar(&c.png, "png", false, "with --out: also write every chart as a PNG file under DIR/charts")
	fs.Func("file", "run the scenario described by this YAML `file` (repeatable)", func(s string) error {
		c.files = append(c.files, s)
		return nil
	})
	fs.IntVar(&c.workers, "workers", 0, "goroutines running trials, one scenario after another (0: GOMAXPROCS, two scenarios at a time)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bar or timings on stderr")
	fs.Func("scope", "live: the `scope` of a policy's budget and breaker: shared by all its clients (default) or per-client", func(s string) error {
		scope, err := live.ParseScope(strings.TrimSpace(s))
		if err != nil {
			return errors.New("scope must be shared or per-client")
		}
		c.scope = scope
		return nil
	})
	fs.BoolVar(&c.sequential, "sequential", false, "live: run the policies one after another instead of at the same time")
	fs.BoolVar(&c.ignoreCancel, "ignore-cancel", false, "live: the server finishes requests whose caller gave up (shows the wasted work)")

	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, errUsage
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		c.scenarios = append(c.scenarios, rest[0])
		rest = rest[1:]
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if len(c.scenarios) > 0 && c.scenarios[0] == "live" {
		c.live = true
		c.scenarios = c.scenarios[1:]
		if err := checkLiveFlags(c); err != nil {
			fmt.Fprintln(stderr, err)
			return nil, errUsage
		}
		return c, nil
	}
	for _, name := range liveOnlyFlags {
		if c.set[name] {
			fmt.Fprintf(stderr, "stormsim: --%s goes with stormsim live\n", name)
			return nil, errUsage
		}
	}
	if len(c.scenarios) > 0 && c.scenarios[0] == "list" {
		if len(c.scenarios) > 1 {
			fmt.Fprintln(stderr, "stormsim: list takes no scenario names")
			return nil, errUsage
		}
		c.list = true
		c.scenarios = nil
	}
	switch {
	case c.clients < 0 || c.clients > 10_000_000:
		fmt.Fprintln(stderr, "stormsim: --clients must be in [0, 10000000]")
		return nil, errUsage
	case c.trials < 0 || c.trials > 1_000_000:
		fmt.Fprintln(stderr, "stormsim: --trials must be in [0, 1000000]")
		return nil, errUsage
	case c.workers < 0 || c.workers > 4096:
		fmt.Fprintln(stderr, "stormsim: --workers must be in [0, 4096]")
		return nil, errUsage
	}
	return c, nil
}

// liveOnlyFlags and virtualOnlyFlags are the flags of one kind of run.
var (
	liveOnlyFlags    = []string{"scope", "sequential", "ignore-cancel"}
	virtualOnlyFlags = []string{"trials", "workers", "file"}
)

// checkLiveFlags checks the flags of "stormsim live".
func checkLiveFlags(c *config) error {
	for _, name := range virtualOnlyFlags {
		if c.set[name] {
			return fmt.Errorf("stormsim live: --%s is for virtual runs", name)
		}
	}
	switch {
	case c.clients < 0 || c.clients > live.MaxClientsLimit:
		return fmt.Errorf("stormsim live: --clients must be in [0, %d]", live.MaxClientsLimit)
	case c.duration > live.MaxDuration:
		return fmt.Errorf("stormsim live: --duration must be at most %s", live.MaxDuration)
	}
	return nil
}

// parseDuration reads a duration flag: a Go duration ("90s", "2m", "1h30m")
// or a plain number of seconds ("90"). It must be in [0, 24h].
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpPnN_") {
		if !(secs >= 0 && secs <= (24*time.Hour).Seconds()) {
			return 0, errors.New("duration must be between 0 and 24h")
		}
		d = time.Duration(secs * float64(time.Second))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (try 90s or 2m)", s)
		}
	}
	if d < 0 || d > 24*time.Hour {
		return 0, errors.New("duration must be between 0 and 24h")
	}
	return d, nil
}

// resolvePolicies turns --policies into the names each scenario runs. A
// name must be known to at least one of the scenarios; each scenario runs
// the names it knows. A scenario that knows none of them is left out
// (skipped reports it) unless the user named it: that is an error.
func resolvePolicies(raw string, scenarios []*sim.Scenario, named bool) (lists [][]string, skipped []string, err error) {
	lists = make([][]string, len(scenarios))
	if strings.TrimSpace(raw) == "" {
		return lists, nil, nil
	}
	anyKnows := func(n string) bool {
		for _, sc := range scenarios {
			if sc.KnownPolicy(n) {
				return true
			}
		}
		return false
	}
	names, err := sim.ParsePolicyList(raw, anyKnows)
	if err != nil {
		return nil, nil, err
	}
	for i, sc := range scenarios {
		for _, n := range names {
			if sc.KnownPolicy(n) {
				lists[i] = append(lists[i], n)
			}
		}
		if len(lists[i]) == 0 {
			if named {
				return nil, nil, fmt.Errorf("%w: none of %q applies to scenario %s", sim.ErrPolicy, raw, sc.Name)
			}
			skipped = append(skipped, sc.Name)
		}
	}
	return lists, skipped, nil
}
