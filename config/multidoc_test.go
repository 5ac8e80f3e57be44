package config

import (
	"errors"
	"strings"
	"testing"
)

// Issue 34 item 7: a file whose second YAML document held a 10-attempt,
// zero-wait policy was read as its first document alone, and the second
// policy was dropped without a word. Parse refuses it at the second
// document's first line, as stormsim check does.
func TestParseRefusesSecondYAMLDocument(t *testing.T) {
	file := "policies:\n  ok:\n    max_attempts: 1\n---\npolicies:\n  hammer:\n    max_attempts: 10\n    backoff: {strategy: constant, base: 0s}\n"
	_, err := Parse("two.yaml", []byte(file))
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 1 {
		t.Fatalf("err = %v, want one problem", err)
	}
	p := e.Problems[0]
	if p.Line != 5 || p.Column != 1 || !strings.Contains(p.Msg, "a second YAML document: a policy file holds one") {
		t.Fatalf("problem %+v, want line 5 col 1, a second YAML document", p)
	}
	// A third document is refused too, at the second's line.
	if _, err := Parse("three.yaml", []byte(file+"---\npolicies: {x: {}}\n")); err == nil || !strings.Contains(err.Error(), "three.yaml:5:") {
		t.Fatalf("three documents: err = %v", err)
	}
	// One document, with a leading --- or a closing ... / trailing ---, is fine.
	for _, one := range []string{
		"---\npolicies:\n  ok:\n    max_attempts: 1\n",
		"policies:\n  ok:\n    max_attempts: 1\n...\n",
		"policies:\n  ok:\n    max_attempts: 1\n---\n",
		"{\"policies\": {\"ok\": {\"max_attempts\": 1}}}\n",
	} {
		if _, err := Parse("one.yaml", []byte(one)); err != nil {
			t.Errorf("%q: %v", one, err)
		}
	}
}
