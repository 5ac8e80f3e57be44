package simtest_test

import (
	"errors"
	"testing"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/simtest"
)

// TestFromFileCodeBuiltOperation: config serves a File built in code
// whose PolicySpec leaves Name empty (the key names the policy), but
// FromFile picked an operation's policy by Handle.Spec().Name, "" for
// such a File, and then dereferenced f.Policies[""] (nil) and panicked.
// It resolves the operation as the Registry does (File.PolicyOf): listed,
// a policy's own name, or the default.
func TestFromFileCodeBuiltOperation(t *testing.T) {
	f := &config.File{
		Policies:   map[string]*config.PolicySpec{"payments": {MaxAttempts: 2}, "fallback": {MaxAttempts: 4}},
		Operations: map[string]string{"charge": "payments"},
		Default:    "fallback",
	}
	var ps []simtest.Policy
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("FromFile(code-built File, ...) panicked: %v", v)
			}
		}()
		ps, err = simtest.FromFile(f, "charge", "payments", "other")
	}()
	if err != nil || len(ps) != 3 {
		t.Fatalf("FromFile = %d policies, %v; want 3", len(ps), err)
	}
	for i, want := range []struct {
		name     string
		attempts int
	}{{"charge (payments)", 2}, {"payments", 2}, {"other (fallback)", 4}} {
		if ps[i].Name != want.name {
			t.Errorf("policy %d: Name %q, want %q", i, ps[i].Name, want.name)
		}
	}
	f.Default = ""
	if _, err := simtest.FromFile(f, "other"); !errors.Is(err, simtest.ErrOperation) {
		t.Errorf("FromFile of an operation the file does not cover = %v, want ErrOperation", err)
	}
}
