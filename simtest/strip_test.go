package simtest

import (
	"testing"

	"github.com/stormguard/stormguard/config"
)

// Taking the sections out blanks exactly their lines, wherever they are:
// first, between the policies' keys, last without a final newline,
// before a second document, with CRLF line ends.
func TestStripSections(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"first", "downstream:\n  workers: 3\n# a comment\npolicies:\n  p: {}\n", "\n\n\npolicies:\n  p: {}\n"},
		{"between", "policies:\n  p: {}\ngates:\n  min_success: 0.5\noperations:\n  o: p\n", "policies:\n  p: {}\n\n\noperations:\n  o: p\n"},
		{"last, no final newline", "policies:\n  p: {}\ngates:\n  min_success: 0.5", "policies:\n  p: {}\n\n"},
		{"before a second document", "policies:\n  p: {}\ngates: {}\n---\nother: 1\n", "policies:\n  p: {}\n\n---\nother: 1\n"},
		{"crlf", "gates: {}\r\npolicies:\r\n  p: {}\r\n", "\r\npolicies:\r\n  p: {}\r\n"},
		{"cr", "gates: {}\rpolicies:\r  p: {}\r", "\rpolicies:\r  p: {}\r"},
		{"nel", "gates: {}\u0085policies:\u0085  p: {}\n", "\u0085policies:\u0085  p: {}\n"},
		{"none", "policies:\n  p: {}\n", "policies:\n  p: {}\n"},
		{"not yaml", "policies: [\n", "policies: [\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := stripSections("f", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if len(splitLines(got)) != len(splitLines([]byte(c.in))) {
				t.Fatal("line count changed")
			}
		})
	}
}

// A policy file with sections parses to the same policies as without.
func TestParsePolicyFileSections(t *testing.T) {
	pf, err := ParsePolicyFile("f.yaml", []byte("downstream:\n  workers: 7\n  timeout: 250ms\ngates:\n  max_recovery: none\n  storms:\n    outage: {max_amplification: 3}\npolicies:\n  p: {max_attempts: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pf.File.Policies["p"] == nil || pf.File.Policies["p"].MaxAttempts != 2 {
		t.Fatalf("policies %+v", pf.File.Policies)
	}
	s := pf.Sections
	if !s.HasDownstream || !s.HasGates || s.Downstream.Workers != 7 || s.Downstream.Timeout.String() != "250ms" ||
		s.Gates.MaxRecovery != NoRecoveryLimit || s.Gates.Storms["outage"].MaxAmplification != 3 {
		t.Fatalf("sections %+v", s)
	}
	g := s.Gates.For(StormOutage)
	if g.MaxAmplification != 3 || g.MaxRecovery != NoRecoveryLimit {
		t.Fatalf("outage gates %+v", g)
	}
	if g := (Gates{}).For(StormBrownout); g.MaxRecovery != DefaultMaxRecovery {
		t.Fatalf("zero gates: %+v", g)
	}
	var ce *config.Error
	if _, err := ParsePolicyFile("f.yaml", []byte("gates: {}\npolicies: {}\n")); err == nil || !asConfig(err, &ce) {
		t.Fatalf("empty policies: %v", err)
	}
}

func asConfig(err error, target **config.Error) bool {
	e, ok := err.(*config.Error)
	*target = e
	return ok
}
