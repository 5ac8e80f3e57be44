package simtest_test

import (
	"strings"
	"testing"

	"github.com/stormguard/stormguard/config"

	"github.com/stormguard/stormguard/simtest"
)

// Issue 34 item 7: a second YAML document, holding a 10-attempt zero-wait
// policy, was dropped without a word and the check passed. check refuses
// it with the line (exit 2), from config.Parse itself, so that the service
// and check agree; a downstream file with a second document is refused
// likewise.
func TestSecondYAMLDocumentIsRefused(t *testing.T) {
	file := "policies:\n  ok:\n    max_attempts: 1\n---\npolicies:\n  hammer:\n    max_attempts: 10\n    backoff: {strategy: constant, base: 0s}\n"
	_, err := simtest.ParsePolicyFile("two.yaml", []byte(file))
	if err == nil || !strings.Contains(err.Error(), "two.yaml:5:") || !strings.Contains(err.Error(), "second YAML document") {
		t.Fatalf("err = %v, want two.yaml:5: ... second YAML document", err)
	}
	path := writeFile(t, "two.yaml", file)
	if code, _, errs := run(t, path); code != simtest.ExitUsage || !strings.Contains(errs, "second YAML document") {
		t.Fatalf("exit %d, want 2:\n%s", code, errs)
	}
	if _, err := config.Parse("two.yaml", []byte(file)); err == nil || !strings.Contains(err.Error(), "two.yaml:5:") {
		t.Fatalf("config.Parse: err = %v, want two.yaml:5:", err)
	}
	if _, err := simtest.ParseSections("ds.yaml", []byte("gates: {max_amplification: 2}\n---\ngates: {max_amplification: none}\n")); err == nil ||
		!strings.Contains(err.Error(), "ds.yaml:3:") || !strings.Contains(err.Error(), "second YAML document") {
		t.Fatalf("downstream file: err = %v, want ds.yaml:3: ... second YAML document", err)
	}
	// One document, with or without a leading ---, is fine.
	if _, err := simtest.ParsePolicyFile("one.yaml", []byte("---\npolicies:\n  ok:\n    max_attempts: 1\n")); err != nil {
		t.Fatal(err)
	}
}
