package simtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/config"
)

// FuzzParseSections: the downstream and gates parser never panics, every
// refusal is an *Error of problems with lines, and whatever it accepts
// either resolves into a model the simulator accepts for every storm, or
// is refused by Resolve with ErrDownstream.
func FuzzParseSections(f *testing.F) {
	for _, s := range []string{
		"downstream:\n  workers: 24\n  service: uniform(60ms,100ms)\n  queue: 3000\n  rate: 200\n  clients: 10\n  latency: normal(2ms,500us)\n  timeout: 1s\n",
		"downstream: {capacity: 500, service: 40ms}\ngates: {max_amplification: 2, max_recovery: none, min_success: 0.9}\n",
		"gates:\n  storms:\n    errors-50: {min_success: 0.6}\n    outage: {max_recovery: 3s}\n",
		"downstream:\n  degrade: {knee: 150, slope: 1, max: 1.5}\n",
		"downstream:\n  wrkers: 3\n",
		"downstream: [1, 2]\n",
		"gates: {max_recovery: 0}\n",
		"downstream:\n  rate: 1e6\n  clients: 1\n  workers: 1000000\n  service: 1m\n",
		"downstream:\n  latency: 0\n",
		"",
		"- a\n",
		"downstream: &a {workers: 3}\ngates: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSections("f.yaml", data)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				if len(e.Problems) == 0 {
					t.Fatal("an *Error without problems")
				}
				if !strings.HasPrefix(err.Error(), "check: f.yaml") {
					t.Fatalf("message %q does not name the file", err)
				}
			} else if !strings.Contains(err.Error(), "larger than") {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if err := s.Gates.validate(); err != nil {
			t.Fatalf("accepted gates fail validation: %v", err)
		}
		d, err := s.Downstream.Resolve()
		if err != nil {
			if !errors.Is(err, ErrDownstream) {
				t.Fatalf("Resolve: %v", err)
			}
			return
		}
		for _, st := range Storms() {
			m := d.model(st)
			if err := m.Validate(); err != nil {
				t.Fatalf("storm %s: the model of an accepted downstream is invalid: %v\n%s", st.Name, err, data)
			}
			if err := m.CheckBaseline(); err != nil {
				t.Fatalf("storm %s: %v", st.Name, err)
			}
		}
		// The same sections inside a policy file: taken out, they leave
		// the policies' lines where they were.
		file := append([]byte("policies:\n  p: {max_attempts: 2}\n"), data...)
		rest, err := stripSections("p.yaml", file)
		if err == nil && len(splitLines(rest)) != len(splitLines(file)) {
			t.Fatalf("stripping changed the number of lines:\n%q\n%q", file, rest)
		}
	})
}

// FuzzParsePolicyFile: a policy file, sections or not, never panics the
// reader; a file it accepts keeps its line count once the sections are
// out, and every problem of a refused one points into the file.
func FuzzParsePolicyFile(f *testing.F) {
	for _, s := range []string{
		"policies:\n  p: {max_attempts: 4}\ndownstream:\n  workers: 3\ngates: {min_success: 0.5}\n",
		"downstream:\n  workers: 3\npolicies:\n  p:\n    backoff: {strategy: nosuch}\n",
		"{\"policies\": {\"p\": {}}, \"gates\": {}}",
		"policies:\n  p: {}\n---\ndownstream: {}\n",
		"gates: {}\ngates: {}\npolicies: {p: {}}\n",
		"policies:\n  p: &x {max_attempts: 2}\ndownstream: *x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := len(splitLines(data))
		pf, err := ParsePolicyFile("p.yaml", data)
		if err != nil {
			var ce *config.Error
			var se *Error
			var probs []Problem
			switch {
			case errors.As(err, &ce):
				probs = ce.Problems
			case errors.As(err, &se):
				probs = se.Problems
			default:
				t.Fatalf("error of type %T: %v", err, err)
			}
			for _, p := range probs {
				if p.Line < 0 || p.Line > lines+1 {
					t.Fatalf("problem on line %d of a %d-line file: %v", p.Line, lines, p)
				}
			}
			return
		}
		if len(pf.File.Policies) == 0 {
			t.Fatal("a file without policies accepted")
		}
	})
}
