package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

func TestParseScenarioFileErrors(t *testing.T) {
	good, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := parseScenarioFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "api-brownout" || !sc.KnownPolicy("careful") || len(sc.Policies) != 5 {
		t.Fatalf("scenario %+v", sc)
	}
	bad := map[string]string{
		"empty":            "",
		"unknown key":      "name: x\nclients: 1\nfoo: 1\n",
		"no tiers":         "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\n",
		"bad duration":     "name: x\nduration: soon\n",
		"bad dist":         "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{service: gamma(1ms)}]\n",
		"unknown fault":    "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\nfaults: [{kind: meteor, start: 0s, end: 1s}]\n",
		"fault tier":       "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\nfaults: [{kind: hang, tier: b, start: 0s, end: 1s}]\n",
		"both arrivals":    "name: x\nclients: 1\narrival: {poisson: 1, every: 1s}\nduration: 1s\ntiers: [{name: a}]\n",
		"standard name":    "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncustom: [{name: full}]\n",
		"bad jitter":       "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncustom: [{name: m, backoff: {jitter: wobbly}}]\n",
		"bad budget":       "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncustom: [{name: m, budget: {kind: piggy}}]\n",
		"bad breaker":      "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncustom: [{name: m, breaker: {failure_ratio: 5}}]\n",
		"too many hops":    "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncustom: [{name: m, hops: [{}, {}]}]\n",
		"unknown policy":   "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\npolicies: [mine]\n",
		"unknown column":   "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\ncolumns: [vibes]\n",
		"no name":          "clients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}]\n",
		"duplicate tier":   "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a}, {name: a}]\n",
		"negative workers": "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 1s\ntiers: [{name: a, workers: -1}]\n",
	}
	for name, text := range bad {
		if _, err := parseScenarioFile([]byte(text)); !errors.Is(err, errFile) {
			t.Errorf("%s: error %v, want errFile", name, err)
		}
	}
}

// FuzzParseScenarioFile: any input either fails with errFile or gives a
// scenario whose model is valid and whose policies are known.
func FuzzParseScenarioFile(f *testing.F) {
	good, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("name: x\nclients: 1\narrival: {every: 1s}\nduration: 2s\ntiers: [{name: a, service: exp(1ms)}]\n"))
	f.Add([]byte("name: x\nclients: 3\narrival: {poisson: 1}\nduration: 1s\ntiers: [{}, {}]\ncustom: [{name: m, hops: [{max_attempts: 2}, {backoff: {strategy: constant, base: 1ms}}]}]\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := parseScenarioFile(data)
		if err != nil {
			if !errors.Is(err, errFile) {
				t.Fatalf("error %v does not wrap errFile", err)
			}
			return
		}
		if sc.Name == "" || len(sc.Policies) == 0 {
			t.Fatalf("scenario without a name or policies: %+v", sc)
		}
		for _, p := range sc.Policies {
			if !sc.KnownPolicy(p) {
				t.Fatalf("default policy %q unknown", p)
			}
		}
	})
}

// FuzzParseArgs: the command line parser never panics, and what it
// accepts is within bounds.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"", "list", "aws-occ --trials 5", "--seed=3 --duration 90s metastable", "--clients -1", "--duration 25h", "-h", "--policies all,full",
		"live", "live gateway-restart --clients 500 --duration 20s", "--json live --scope per-client --sequential", "live --trials 3",
		"--ignore-cancel live slow-downstream", "live --clients 20000", "live --duration 11m", "--scope shared", "live list", "list live"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := parseArgs(strings.Fields(line), io.Discard)
		if err != nil {
			return
		}
		if c.clients < 0 || c.trials < 0 || c.workers < 0 || c.duration < 0 || c.duration > 24*time.Hour {
			t.Fatalf("%q accepted out of range: %+v", line, c)
		}
		if c.list && (len(c.scenarios) > 0 || c.live) {
			t.Fatalf("%q: list with scenarios", line)
		}
		if c.live {
			// A live run is bounded, and takes none of the virtual flags.
			if c.clients > live.MaxClientsLimit || c.duration > live.MaxDuration || c.trials != 0 || c.workers != 0 || len(c.files) > 0 {
				t.Fatalf("%q: live run accepted out of bounds: %+v", line, c)
			}
			runs, err := pickLiveRuns(c.scenarios)
			if err != nil {
				return
			}
			if len(runs) == 0 || (len(c.scenarios) > 0 && len(runs) != len(c.scenarios)) {
				t.Fatalf("%q: live runs %d for names %q", line, len(runs), c.scenarios)
			}
			if lists, err := liveRunPolicies(c.policies, runs); err == nil {
				for i, names := range lists {
					for _, n := range names {
						if !runs[i].knows(n) {
							t.Fatalf("%q: policy %q unknown to %s", line, n, runs[i].name())
						}
					}
				}
			} else if !errors.Is(err, sim.ErrPolicy) {
				t.Fatalf("%q: policy error %v does not wrap sim.ErrPolicy", line, err)
			}
			return
		}
		if c.scope != live.Shared || c.sequential || c.ignoreCancel {
			t.Fatalf("%q: live flags accepted for a virtual run: %+v", line, c)
		}
		if c.policies != "" {
			scs := sim.Scenarios()
			if lists, _, err := resolvePolicies(c.policies, scs, false); err == nil {
				for i, names := range lists {
					for _, n := range names {
						if !scs[i].KnownPolicy(n) {
							t.Fatalf("%q resolved to %q, unknown to %s", line, n, scs[i].Name)
						}
					}
				}
			}
		}
	})
}

// FuzzParseDuration: accepted durations are in [0, 24h], and a Go
// duration string of an accepted value reads back the same.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "2m", "1h30m", "90", "0.5", "-1s", "1e9", "NaN", "inf", "24h", "24h1ns", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			return
		}
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("%q → %v out of range", s, d)
		}
		back, err := parseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("%q → %v → %v, %v", s, d, back, err)
		}
	})
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "90": 90 * time.Second, "0.25": 250 * time.Millisecond, " 2m ": 2 * time.Minute, "0": 0} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1s", "-5", "25h", "NaN", "Inf", "1e300", "soon", "0x1p3"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
	var buf bytes.Buffer
	if _, err := parseArgs([]string{"--duration", "-3s"}, &buf); err == nil {
		t.Error("--duration -3s accepted")
	}
}

// Mistakes that used to validate and then do nothing, or far more than
// meant, are refused with the line they sit on.
func TestScenarioFileRefusesSilentMistakes(t *testing.T) {
	head := "name: x\nclients: 1\narrival: {poisson: 1}\nduration: 10s\nwarmup: 1s\ntiers: [{name: a, workers: 4}, {name: b}]\n"
	for name, tc := range map[string]struct{ text, want string }{
		"loss without prob":   {head + "faults:\n  - {kind: loss, tier: a, start: 2s, end: 3s}\n", "line 8: faults[0]: a loss fault needs prob"},
		"errors without prob": {head + "faults:\n  - {kind: hang, tier: a, start: 2s, end: 3s}\n  - {kind: errors, tier: a, start: 2s, end: 3s}\n", "line 9: faults[1]: a errors fault needs prob"},
		"capacity no factor":  {head + "faults:\n  - {kind: capacity, tier: a, start: 2s, end: 3s}\n", "line 8: faults[0]: a capacity fault needs factor"},
		"capacity unlimited":  {head + "faults:\n  - {kind: capacity, tier: b, start: 2s, end: 3s, factor: 0.5}\n", `line 8: faults[0]: a capacity fault on tier "b", whose workers are unlimited`},
		"capacity last tier":  {head + "faults:\n  - {kind: capacity, start: 2s, end: 3s, factor: 0.5}\n", `on tier "b", whose workers are unlimited`},
		"second document":     {head + "---\nname: y\n", "line 7: a second YAML document"},
		"queue zero":          {"name: x\nclients: 1\narrival: {poisson: 1}\nduration: 10s\nwarmup: 1s\ntiers:\n  - name: a\n    workers: 4\n    queue: 0\n", "line 9: tiers[0]: queue 0 reads two ways"},
		"fault in warm-up":    {head + "faults:\n  - {kind: unavailable, tier: a, start: 1s, end: 3s}\n", "not after the warm-up"},
		"unbounded work":      {"name: x\nclients: 10000000\narrival: {poisson: 1000000}\nduration: 24h\ntiers: [{name: a}]\n", ""},
	} {
		_, err := parseScenarioFile([]byte(tc.text))
		if !errors.Is(err, errFile) || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%s: error %v, want errFile saying %q", name, err, tc.want)
		}
	}
	ok := head + "faults:\n  - {kind: capacity, tier: a, start: 2s, end: 3s, factor: 0.5}\n  - {kind: loss, tier: a, start: 2s, end: 3s, prob: 0.1}\n"
	if _, err := parseScenarioFile([]byte(ok)); err != nil {
		t.Fatalf("a correct file is refused: %v", err)
	}
}
