package main

import (
	"os"
	"strings"
	"testing"
)

// The README's front page quotes the metastable scenario's first table
// (its blip case); it must be what
// the current code prints (regenerate with the command in the test).
func TestREADMEQuotesTheCurrentMetastableTable(t *testing.T) {
	fullModel(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "```\nMetastable failure")
	if i < 0 {
		t.Fatal("README has no metastable table")
	}
	s = s[i+4:]
	quoted := s[:strings.Index(s, "```")]

	code, out, errOut := runCLI(t, "metastable", "--policies", "no-retry,immediate,exponential,full,full+budget,full+budget+breaker")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The first table: the blip case (the paper and stall cases follow).
	table := out[:strings.Index(out, "\n\n")]
	if strings.TrimSpace(table) != strings.TrimSpace(quoted) {
		t.Errorf("README.md's metastable table drifted from the output of\n"+
			"  go run ./cmd/stormsim metastable --policies no-retry,immediate,exponential,full,full+budget,full+budget+breaker\n"+
			"README:\n%s\nnow:\n%s", quoted, table)
	}
}
