package simtest_test

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/simtest"
)

// Policy files the loader refuses: check prints the problems of the
// service's loader (config.Load) for the same file, each as a
// file:line:col line (the YAML parser's own words rewritten), and exits 2.
func TestPolicyFileErrorsAreTheLoaders(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"syntax", "policies:\n  p:\n    max_attempts: [4\n", "FILE:3:5: an unclosed [: a flow list needs a , between its items and a closing ]"},
		{"unknown field", "policies:\n  p:\n    max_atempts: 4\n", `FILE:3:5: policies.p.max_atempts: unknown field (known: `},
		{"unregistered strategy", "policies:\n  p:\n    backoff:\n      strategy: fibonacci\n", `FILE:4:17: policies.p.backoff.strategy: "fibonacci" is not a registered strategy (known: `},
		{"bad duration", "policies:\n  p:\n    backoff: {strategy: full_jitter, base: 50ms, max: 5x}\n", `FILE:3:55: policies.p.backoff.max: "5x" is not a duration`},
		{"no policies", "operations:\n  a: b\n", "FILE:1:1: "},
		{"empty", "", "FILE:1:1: the file is empty"},
		{"unknown top-level key", "policies:\n  p: {max_attempts: 2}\nstorms: {}\n", `FILE:3:1: storms: unknown field (known: admission, default, operations, policies)`},
		{"undefined policy", "policies:\n  p: {max_attempts: 2}\noperations:\n  op: q\n", `FILE:4:7: operations.op: policy "q" is not defined`},
		{"renamed key", "policies:\n  p:\n    budget: {kind: window, percent: 10}\n", `FILE:3:28: policies.p.budget.percent: renamed to ratio`},
		{"a list", "- a\n- b\n", "FILE:1:1: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "policies.yaml", c.file)
			code, out, errs := run(t, path)
			if code != simtest.ExitUsage {
				t.Fatalf("exit %d, want 2\n%s\n%s", code, out, errs)
			}
			if out != "" {
				t.Errorf("stdout not empty: %s", out)
			}
			mustContain(t, "stderr", errs, strings.ReplaceAll(c.want, "FILE", path))
			_, lerr := config.Load(path)
			var ce *config.Error
			if !errors.As(lerr, &ce) {
				t.Fatalf("config.Load: %v", lerr)
			}
			for _, p := range ce.Problems {
				if p.Path != "" { // the loader's own words, at its line and column
					mustContain(t, "stderr", errs, simtest.FormatProblem(p))
				}
			}
			if n := len(regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(path)+`:\d+:\d+: `).FindAllString(errs, -1)); n != len(ce.Problems) {
				t.Errorf("%d problem lines, the loader has %d:\n%s", n, len(ce.Problems), errs)
			}
		})
	}
}

// Sections taken out of a policy file keep every other line where it
// was: a policy error below them is reported on its own line.
func TestSectionsKeepLineNumbers(t *testing.T) {
	file := "downstream:\n  workers: 10\n  rate: 100\ngates:\n  max_amplification: 2\npolicies:\n  p:\n    backoff: {strategy: full_jitter, max: 5x}\n"
	path := writeFile(t, "policies.yaml", file)
	code, _, errs := run(t, path)
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, errs)
	}
	want := path + `:8:43: policies.p.backoff.max: "5x" is not a duration (use a number with a unit: 250ms, 2s, 1m)`
	if first := strings.SplitN(errs, "\n", 2)[0]; first != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errs, want)
	}
}

// The downstream and gates sections: unknown fields, wrong types and
// values out of range are refused with their lines and paths, all at
// once, exit 2.
func TestSectionErrors(t *testing.T) {
	const pol = "policies:\n  p: {max_attempts: 2}\n"
	cases := []struct {
		name, sections string
		wants          []string
	}{
		{"unknown field", "downstream:\n  wrkers: 10\n", []string{`FILE:4: downstream.wrkers: unknown field (known: capacity, clients, degrade, latency, queue, rate, service, timeout, workers)`}},
		{"unknown gate", "gates:\n  max_amp: 2\n", []string{`FILE:4: gates.max_amp: unknown field (known: max_amplification, max_recovery, min_success, storms)`}},
		{"unknown degrade field", "downstream:\n  degrade: {knee: 1, slop: 2}\n", []string{`FILE:4: downstream.degrade.slop: unknown field (known: knee, max, slope)`}},
		{"several", "downstream:\n  workers: lots\n  service: exp(20x)\n  rate: -5\n  timeout: soon\n", []string{
			`FILE:4: downstream.workers: "lots" is not a whole number`,
			`FILE:5: downstream.service: "20x" is not a duration`,
			`FILE:6: downstream.rate: -5 is outside (0, 1e6] calls/s`,
			`FILE:7: downstream.timeout: "soon" is not a duration`}},
		{"both sizes", "downstream:\n  workers: 10\n  capacity: 100\n", []string{`FILE:5: downstream.capacity: set workers or capacity, not both`}},
		{"bad storm", "gates:\n  storms:\n    typhoon: {min_success: 0.5}\n", []string{`FILE:5: gates.storms.typhoon: not a storm (storms: outage, brownout, latency-spike, errors-10, errors-50, throttle)`}},
		{"bad share", "gates:\n  min_success: 95\n", []string{`FILE:4: gates.min_success: 95 must be a share in (0, 1] (0.95 is 95%)`}},
		{"amplification below 1", "gates:\n  max_amplification: 0.5\n", []string{`FILE:4: gates.max_amplification: 0.5 must be at least 1`}},
		{"recovery 0", "gates:\n  max_recovery: 0\n", []string{`FILE:4: gates.max_recovery: 0 is not a limit`}},
		{"section not a mapping", "downstream: 5\n", []string{`FILE:3: downstream: "5" is not a mapping`}},
		{"twice", "gates: {}\ngates: {}\n", []string{`FILE:4: gates: appears twice`}},
		{"queue 0", "downstream:\n  queue: 0\n", []string{`FILE:4: downstream.queue: 0 is outside [1, 10000000]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "policies.yaml", pol+c.sections)
			code, out, errs := run(t, path)
			if code != simtest.ExitUsage {
				t.Fatalf("exit %d, want 2\n%s\n%s", code, out, errs)
			}
			for _, w := range c.wants {
				mustMatchLine(t, "stderr", errs, strings.ReplaceAll(w, "FILE", path))
			}
			// The same sections in a --downstream file: the same messages,
			// two lines up (no policies above them).
			dpath := writeFile(t, "check.yaml", c.sections)
			code, _, errs = run(t, "--downstream", dpath, "testdata/budgeted.yaml")
			if code != simtest.ExitUsage {
				t.Fatalf("--downstream: exit %d, want 2\n%s", code, errs)
			}
			for _, w := range c.wants {
				w = strings.ReplaceAll(w, "FILE", dpath)
				w = lineNo.ReplaceAllStringFunc(w, func(m string) string { // two lines up
					n, _ := strconv.Atoi(strings.Trim(m, ":"))
					return ":" + strconv.Itoa(n-2) + ":"
				})
				mustMatchLine(t, "--downstream stderr", errs, w)
			}
		})
	}
}

var lineNo = regexp.MustCompile(`:\d+:`)

// mustMatchLine is mustContain for a want of the form "file:line: rest":
// got must hold "file:line:col: rest", for some column.
func mustMatchLine(t *testing.T, what, got, want string) {
	t.Helper()
	i := lineNo.FindStringIndex(want)
	re := regexp.MustCompile(regexp.QuoteMeta(want[:i[1]]) + `\d+: ` + regexp.QuoteMeta(strings.TrimPrefix(want[i[1]:], " ")))
	if !re.MatchString(got) {
		t.Errorf("%s lacks %q (with a column); got:\n%s", what, want, got)
	}
}

// Command-line mistakes: exit 2 with a message and the usage.
func TestUsageErrors(t *testing.T) {
	flow := writeFile(t, "flow.json", `{"policies": {"p": {"max_attempts": 2}}, "downstream": {"workers": 3}}`)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "name the policy files to check"},
		{"unknown flag", []string{"--max-amp", "2", "testdata/budgeted.yaml"}, "flag provided but not defined: -max-amp"},
		{"bad recovery", []string{"--max-recovery", "soon", "testdata/budgeted.yaml"}, "want a positive duration such as 10s, or none"},
		{"bad share", []string{"--min-success", "120%", "testdata/budgeted.yaml"}, "want a share in (0, 1]"},
		{"bad amplification", []string{"--max-amplification", "0.5", "testdata/budgeted.yaml"}, "want at least 1"},
		{"bad storm", []string{"--storms", "typhoon", "testdata/budgeted.yaml"}, `unknown storm "typhoon"`},
		{"bad workers", []string{"--workers", "0", "testdata/budgeted.yaml"}, "-workers 0: want at least 1"},
		{"bad service", []string{"--service", "gamma(3)", "testdata/budgeted.yaml"}, `unknown distribution "gamma"`},
		{"missing file", []string{"testdata/nosuch.yaml"}, "no such file or directory"},
		{"missing downstream file", []string{"--downstream", "testdata/nosuch.yaml", "testdata/budgeted.yaml"}, "no such file or directory"},
		{"unknown operation", []string{"--operation", "nosuch", "testdata/budgeted.yaml"}, `testdata/budgeted.yaml:1:1: unknown operation "nosuch": the file gives it no policy`},
		{"workers and capacity", []string{"--workers", "5", "--capacity", "100", "testdata/budgeted.yaml"}, "-workers and -capacity: set one"},
		{"service 0", []string{"--service", "0s", "testdata/budgeted.yaml"}, "-service 0s: want a mean above 0"},
		{"latency 0", []string{"--latency", "0", "testdata/budgeted.yaml"}, "-latency 0: the model takes at least 1µs"},
		{"both downstreams", []string{"--downstream", "testdata/downstream.yaml", "testdata/infile.yaml"}, "have a downstream section: keep one"},
		{"flow style", []string{flow}, "a downstream or gates section in a flow-style ({...} or JSON) policy file cannot be read beside the policies"},
		{"capacity over workers", []string{"--rate", "1e9", "testdata/budgeted.yaml"}, "rate must be in (0, 1e6]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := run(t, c.args...)
			if code != simtest.ExitUsage {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errs)
			}
			mustContain(t, "stderr", errs, c.want)
		})
	}
	code, _, errs := run(t, "-h")
	if code != simtest.ExitPass {
		t.Errorf("-h: exit %d, want 0", code)
	}
	mustContain(t, "-h", errs, "usage: stormsim check", "Exit codes: 0 every gate kept; 1 a gate failed; 2", "-max-amplification")
}

// A directory the report cannot be written to: exit 2.
func TestOutUnwritable(t *testing.T) {
	fullModel(t)
	file := writeFile(t, "x", "")
	code, _, errs := run(t, "--storms", "errors-10", "--out", file+"/sub", "testdata/budgeted.yaml")
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, errs)
	}
	mustContain(t, "stderr", errs, "budgeted.yaml: --out:")
	if _, err := os.Stat(file + "/sub"); err == nil {
		t.Error("a directory was made inside a file")
	}
}
