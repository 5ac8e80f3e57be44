package simtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// Exit codes of Main.
const (
	// ExitPass: every policy kept every gate in every storm.
	ExitPass = 0
	// ExitFail: at least one policy failed a gate; stderr names each
	// policy, storm and gate, and by how much.
	ExitFail = 1
	// ExitUsage: the check could not be run: bad flags, an unreadable or
	// invalid policy or downstream file (the loader's line-numbered
	// messages), an operation with no policy, a model the simulator
	// refuses, or an unwritable --out directory.
	ExitUsage = 2
)

const usage = `usage: stormsim check [flags] policies.yaml

Runs each policy of the file (or those serving --operation) against a storm
suite on a simulated downstream, and fails when a gate is not kept.
Storms: outage, brownout, latency-spike, errors-10, errors-50, throttle.

Each storm runs --trials times (default 3) with different seeds; every gate
is judged on the trials' mean and its 95% interval (Student's t). A result
whose interval crosses a gate is BORDERLINE: it fails unless
--pass-borderline.

Default gates (when neither the file nor a flag sets them): peak
amplification at most 2× the baseline load, recovery within 10s after
every storm; no success gate.

Exit codes: 0 every gate kept; 1 a gate failed; 2 the check could not be
run (bad flags or files, with the loader's line-numbered messages).

Flags:
`

// Main is the stormsim check command: args are the arguments after
// "check". It writes the report to stdout and messages to stderr, and
// returns the exit code (ExitPass, ExitFail or ExitUsage).
func Main(args []string, stdout, stderr io.Writer) int {
	return MainContext(context.Background(), args, stdout, stderr)
}

// MainContext is Main that stops when ctx ends (a Ctrl-C), returning
// ExitUsage.
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitPass
	}
	if err != nil {
		return ExitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, err)
		return ExitUsage
	}
	pf, err := LoadPolicyFile(cl.file)
	if err != nil {
		return fail(err)
	}
	secs := pf.Sections
	if secs.HasDownstream || secs.HasGates {
		fmt.Fprintf(stderr, "check: note: %s holds downstream or gates sections, which the service's loader (config) refuses: "+
			"if the service loads this file, move them to a file of their own (--downstream)\n", cl.file)
	}
	if cl.downstream != "" {
		data, err := readFile(cl.downstream)
		if err != nil {
			return fail(err)
		}
		ds, err := ParseSections(cl.downstream, data)
		if err != nil {
			return fail(err)
		}
		if ds.HasDownstream && secs.HasDownstream {
			return fail(fmt.Errorf("check: both %s and %s have a downstream section: keep one", cl.file, cl.downstream))
		}
		if ds.HasGates && secs.HasGates {
			return fail(fmt.Errorf("check: both %s and %s have a gates section: keep one", cl.file, cl.downstream))
		}
		if ds.HasDownstream {
			secs.Downstream, secs.HasDownstream = ds.Downstream, true
		}
		if ds.HasGates {
			secs.Gates, secs.HasGates = ds.Gates, true
		}
	}
	d, g := secs.Downstream, secs.Gates
	cl.apply(&d, &g)
	policies, err := FromFile(pf.File, cl.operations...)
	if err != nil {
		return fail(fmt.Errorf("check: %s: %w", cl.file, err))
	}
	rep, err := Run(ctx, policies, d, g, Options{Seed: cl.seed, Storms: cl.storms, Trials: cl.trials})
	if err != nil {
		return fail(fmt.Errorf("check: %s: %w", cl.file, err))
	}
	rep.File, rep.Version = cl.file, pf.File.Version
	if cl.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return fail(fmt.Errorf("check: writing the report: %w", err))
	}
	if cl.out != "" {
		if err := writeOut(cl.out, rep); err != nil {
			return fail(fmt.Errorf("check: --out: %w", err))
		}
		fmt.Fprintf(stderr, "check: report written to %s\n", filepath.Join(cl.out, "index.html"))
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(stderr, "check: FAIL %s\n", f.Message)
	}
	if !rep.Pass {
		failed := 0
		for _, p := range rep.Policies {
			if !p.Pass {
				failed++
			}
		}
		fmt.Fprintf(stderr, "check: %d gate(s) failed, in %d of %d policies\n", len(rep.Failures), failed, len(rep.Policies))
		return ExitFail
	}
	fmt.Fprintf(stderr, "check: %d policies × %d storms: every gate kept\n", len(rep.Policies), len(rep.Storms))
	return ExitPass
}

// cmdline is the parsed command line.
type cmdline struct {
	file, downstream, out string
	operations, storms    []string
	json                  bool
	seed                  uint64
	trials                int
	passBorderline        bool
	set                   map[string]bool // flags given

	maxAmp, minSuccess float64
	maxRecovery        time.Duration
	clients, workers   int
	queue              int
	rate, capacity     float64
	service, latency   sim.Dist
	timeout            time.Duration
}

// listFlag collects comma-separated values, over repeated flags.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l.v = append(*l.v, f)
		}
	}
	return nil
}

type distFlag struct{ d *sim.Dist }

func (f distFlag) String() string {
	if f.d == nil || *f.d == (sim.Dist{}) {
		return ""
	}
	return f.d.String()
}

func (f distFlag) Set(s string) error {
	d, err := sim.ParseDist(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "sim: invalid distribution: "))
	}
	*f.d = d
	return nil
}

type recoveryFlag struct{ d *time.Duration }

func (f recoveryFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	if *f.d == NoRecoveryLimit {
		return "none"
	}
	return f.d.String()
}

func (f recoveryFlag) Set(s string) error {
	if s == "none" {
		*f.d = NoRecoveryLimit
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 10s, or none")
	}
	*f.d = d
	return nil
}

// ampFlag reads an amplification limit, or none.
type ampFlag struct{ v *float64 }

func (f ampFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	if *f.v == NoAmplificationLimit {
		return "none"
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f ampFlag) Set(s string) error {
	if s == "none" {
		*f.v = NoAmplificationLimit
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !finite(v) || v < 1 {
		return errors.New("want at least 1 (the baseline load itself), or none")
	}
	*f.v = v
	return nil
}

// shareFlag reads a share as a fraction (0.95) or a percentage (95%).
type shareFlag struct{ v *float64 }

func (f shareFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f shareFlag) Set(s string) error {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || !finite(v) || v <= 0 || v > 1 {
		return errors.New("want a share in (0, 1] such as 0.95, or a percentage such as 95%")
	}
	*f.v = v
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*cmdline, error) {
	cl := &cmdline{set: map[string]bool{}}
	fs := flag.NewFlagSet("stormsim check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.Var(listFlag{&cl.operations}, "operation", "check only the policies serving these operations (comma-separated, repeatable)")
	fs.Var(listFlag{&cl.storms}, "storms", "run only these storms (comma-separated): "+strings.Join(StormNames(), ", "))
	fs.Var(ampFlag{&cl.maxAmp}, "max-amplification", fmt.Sprintf("gate: the most peak amplification (offered load over baseline) a storm may cause, or none (default %d)", DefaultMaxAmplification))
	fs.Var(recoveryFlag{&cl.maxRecovery}, "max-recovery", "gate: the longest recovery after a storm's trigger ends, or none (default 10s)")
	fs.Var(shareFlag{&cl.minSuccess}, "min-success", "gate: the least share of calls that must succeed while each storm's trigger lasts, and after it (0.95 or 95%; default none)")
	fs.BoolVar(&cl.json, "json", false, "print the report as JSON")
	fs.StringVar(&cl.out, "out", "", "write an HTML report (index.html) and report.json to this directory")
	fs.Uint64Var(&cl.seed, "seed", 1, "seed of every random draw: the same seed gives the same report")
	fs.IntVar(&cl.trials, "trials", DefaultTrials, fmt.Sprintf("runs of each storm, with different seeds; gates judge their mean and its 95%% interval (%d to %d)", MinTrials, MaxTrials))
	fs.BoolVar(&cl.passBorderline, "pass-borderline", false, "let a borderline result pass (its 95% interval crosses a gate); by default it fails")
	fs.StringVar(&cl.downstream, "downstream", "", "a file with the downstream and gates sections")
	fs.IntVar(&cl.clients, "clients", 0, "downstream: client instances in the fleet, each with its own budget and breaker (default 10)")
	fs.Float64Var(&cl.rate, "rate", 0, "downstream: steady calls/s across the fleet (default 60% of capacity)")
	fs.IntVar(&cl.workers, "workers", 0, "downstream: requests served at once (default 20)")
	fs.Float64Var(&cl.capacity, "capacity", 0, "downstream: requests/s served, instead of workers (workers = capacity × mean service)")
	fs.Var(distFlag{&cl.service}, "service", "downstream: service time, a duration or distribution such as exp(20ms) (default uniform(10ms,30ms))")
	fs.IntVar(&cl.queue, "queue", 0, "downstream: queue length, -1 for none (default two seconds of work)")
	fs.Var(distFlag{&cl.latency}, "latency", "downstream: one-way network latency per leg (default 1ms)")
	fs.DurationVar(&cl.timeout, "timeout", 0, "downstream: the client's attempt timeout, for policies without attempt_timeout (default 1s)")

	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) { cl.set[f.Name] = true })
	bad := func(format string, a ...any) (*cmdline, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "stormsim check: %v\n", err)
		fs.Usage()
		return nil, err
	}
	switch len(files) {
	case 0:
		return bad("name the policy file to check")
	case 1:
		cl.file = files[0]
	default:
		return bad("one policy file at a time, got %d: %s", len(files), strings.Join(files, " "))
	}
	if cl.trials < MinTrials || cl.trials > MaxTrials {
		return bad("-trials %d: want %d to %d", cl.trials, MinTrials, MaxTrials)
	}
	if _, err := pickStorms(cl.storms); err != nil {
		return bad("-storms: %v", err)
	}
	for _, n := range []string{"clients", "workers"} {
		v := map[string]int{"clients": cl.clients, "workers": cl.workers}[n]
		if cl.set[n] && v < 1 {
			return bad("-%s %d: want at least 1", n, v)
		}
	}
	if cl.set["queue"] && (cl.queue < -1 || cl.queue == 0) {
		return bad("-queue %d: want at least 1, or -1 for none", cl.queue)
	}
	if cl.set["rate"] && (!finite(cl.rate) || cl.rate <= 0) {
		return bad("-rate %g: want a positive number of calls/s", cl.rate)
	}
	if cl.set["capacity"] && (!finite(cl.capacity) || cl.capacity <= 0) {
		return bad("-capacity %g: want a positive number of requests/s", cl.capacity)
	}
	if cl.set["workers"] && cl.set["capacity"] {
		return bad("-workers and -capacity: set one (capacity = workers / mean service time)")
	}
	if cl.set["service"] && cl.service.Mean() <= 0 {
		return bad("-service %s: want a mean above 0", cl.service)
	}
	if cl.set["latency"] && cl.latency == (sim.Dist{}) {
		return bad("-latency 0: the model takes at least 1µs")
	}
	if cl.set["timeout"] && cl.timeout <= 0 {
		return bad("-timeout %s: want a positive duration", cl.timeout)
	}
	return cl, nil
}

// apply lays the flags given over the file's downstream and gates.
func (cl *cmdline) apply(d *Downstream, g *Gates) {
	if cl.set["clients"] {
		d.Clients = cl.clients
	}
	if cl.set["rate"] {
		d.Rate = cl.rate
	}
	if cl.set["workers"] {
		d.Workers, d.Capacity = cl.workers, 0
	}
	if cl.set["capacity"] {
		d.Capacity, d.Workers = cl.capacity, 0
	}
	if cl.set["service"] {
		d.Service = cl.service
	}
	if cl.set["queue"] {
		d.Queue = cl.queue
	}
	if cl.set["latency"] {
		d.Latency = cl.latency
	}
	if cl.set["timeout"] {
		d.Timeout = cl.timeout
	}
	if cl.set["max-amplification"] {
		g.MaxAmplification = cl.maxAmp
	}
	if cl.set["max-recovery"] {
		g.MaxRecovery = cl.maxRecovery
	}
	if cl.set["min-success"] {
		g.MinSuccess = cl.minSuccess
	}
	if cl.passBorderline {
		g.PassBorderline = true
	}
}

// writeOut writes index.html and report.json into dir.
func writeOut(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	h, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	if err := rep.WriteHTML(h); err != nil {
		h.Close()
		return err
	}
	return h.Close()
}
