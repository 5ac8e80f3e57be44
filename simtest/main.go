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

const usage = `usage: stormsim check [flags] policies.yaml [more.yaml 'config/*.yaml' ...]

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

Several files, and globs, are each judged on their own. Every problem
and failure line on stderr is file:line:col: message.

Exit codes: 0 every gate kept; 1 a gate failed; 2 the check could not be
run (bad flags or files, with the loader's line-numbered messages; an
unwritable --out when no gate failed).

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
//
// Every problem and failure line on stderr is "file:line:col: message",
// with no prefix, for editors and CI problem matchers. Each file named
// (or matched by a glob) is judged on its own; the exit code is
// ExitUsage when any file could not be checked, else ExitFail when any
// failed a gate. A failing --out is reported after the FAIL lines and
// does not hide a gate failure: the exit code is then ExitFail.
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitPass
	}
	if err != nil {
		return ExitUsage
	}
	run := &Results{ModelVersion: ModelVersion, ToolVersion: toolVersion()}
	var ds *Sections
	if cl.downstream != "" {
		s, err := loadSections(cl.downstream)
		if err != nil {
			run.Files = append(run.Files, FileResult{File: cl.downstream, Verdict: VerdictError, Problems: reportProblems(Problems(cl.downstream, err), SeverityError)})
		}
		ds = &s
	}
	if len(run.Files) == 0 {
		for _, file := range expandFiles(cl.files) {
			if ctx.Err() != nil {
				break
			}
			run.Files = append(run.Files, checkFile(ctx, cl, file, ds))
		}
	}
	if err := ctx.Err(); err != nil {
		fmt.Fprintf(stderr, "interrupted: %v\n", err)
		return ExitUsage
	}
	run.summarize()
	if err := run.write(stdout, cl.format); err != nil {
		fmt.Fprintf(stderr, "writing the report: %v\n", err)
		return ExitUsage
	}
	outFailed := false
	if cl.out != "" {
		outFailed = !writeOuts(cl.out, run, stderr)
	}
	run.writeLines(stderr)
	switch {
	case run.Summary.Errors > 0:
		return ExitUsage
	case run.Summary.Failed > 0:
		return ExitFail
	case outFailed:
		return ExitUsage
	}
	return ExitPass
}

// loadSections reads a --downstream file.
func loadSections(path string) (Sections, error) {
	data, err := readFile(path)
	if err != nil {
		return Sections{}, err
	}
	return ParseSections(path, data)
}

// expandFiles expands the globs among names (a name that matches no file
// is kept, to be reported as unreadable), without repeats.
func expandFiles(names []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, n := range names {
		if strings.ContainsAny(n, "*?[") {
			if m, err := filepath.Glob(n); err == nil && len(m) > 0 {
				for _, f := range m {
					add(f)
				}
				continue
			}
		}
		add(n)
	}
	return out
}

// checkFile checks one policy file; ds is the --downstream file's
// sections, if any.
func checkFile(ctx context.Context, cl *cmdline, file string, ds *Sections) FileResult {
	res := FileResult{File: file, Verdict: VerdictError}
	fail := func(err error) FileResult {
		res.Problems = append(res.Problems, reportProblems(Problems(file, err), SeverityError)...)
		return res
	}
	pf, err := LoadPolicyFile(file)
	if err != nil {
		return fail(err)
	}
	secs := pf.Sections
	if secs.HasDownstream || secs.HasGates {
		line, col := pf.sectionsAt[0], pf.sectionsAt[1]
		res.Problems = append(res.Problems, ProblemReport{File: file, Line: max(line, 1), Column: max(col, 1), Severity: SeverityWarning,
			Message: "this file holds downstream or gates sections, which the service's loader (config) refuses: if the service loads this file, move them to a file of their own (--downstream)"})
	}
	if ds != nil {
		if ds.HasDownstream && secs.HasDownstream {
			return fail(fmt.Errorf("both %s and %s have a downstream section: keep one", file, cl.downstream))
		}
		if ds.HasGates && secs.HasGates {
			return fail(fmt.Errorf("both %s and %s have a gates section: keep one", file, cl.downstream))
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
		return fail(err)
	}
	rep, err := Run(ctx, policies, d, g, Options{Seed: cl.seed, Storms: cl.storms, Trials: cl.trials})
	if err != nil {
		return fail(err)
	}
	rep.File, rep.Version = file, pf.File.Version
	res.Report, res.positions = rep, map[string][2]int{}
	for _, p := range policies {
		if p.spec != nil {
			line, col := pf.Position(p.spec.Name)
			res.positions[p.Name] = [2]int{line, col}
		}
	}
	res.Verdict = VerdictPass
	if !rep.Pass {
		res.Verdict = VerdictFail
	}
	return res
}

// cmdline is the parsed command line.
type cmdline struct {
	files              []string
	format             string
	downstream, out    string
	operations, storms []string
	json               bool
	seed               uint64
	trials             int
	passBorderline     bool
	set                map[string]bool // flags given

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
	fs.BoolVar(&cl.json, "json", false, "print the report as JSON (--format json)")
	fs.StringVar(&cl.format, "format", "text", "the report on stdout: text, json, junit (JUnit XML), sarif (SARIF 2.1.0) or github (the text, and a workflow annotation per problem and failure)")
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
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return nil, err
	}
	if len(files) == 0 {
		return bad("name the policy files to check")
	}
	cl.files = files
	if cl.json {
		if cl.set["format"] && cl.format != "json" {
			return bad("--json and --format %s: choose one", cl.format)
		}
		cl.format = "json"
	}
	if !contains(Formats, cl.format) {
		return bad("--format %s: want one of %s", cl.format, strings.Join(Formats, ", "))
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
