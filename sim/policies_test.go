package sim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
)

func TestParsePolicyList(t *testing.T) {
	got, err := ParsePolicyList(" full-jitter, no-retry ,full,mine", func(s string) bool { return s == "mine" })
	if err != nil || !slices.Equal(got, []string{PolicyFull, PolicyNoRetry, "mine"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	all, err := ParsePolicyList("ALL", nil)
	if err != nil || !slices.Equal(all, PolicyNames()) {
		t.Fatalf("all: %v, %v", all, err)
	}
	for _, bad := range []string{"", ",", "fulll", "full,nope"} {
		if _, err := ParsePolicyList(bad, nil); !errors.Is(err, ErrPolicy) {
			t.Errorf("ParsePolicyList(%q): %v, want ErrPolicy", bad, err)
		}
	}
}

func FuzzParsePolicyList(f *testing.F) {
	for _, s := range []string{"full", "all", "no-retry,full+budget", " , ", "mine,full", "FULL-JITTER"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePolicyList(s, func(n string) bool { return n == "mine" })
		if err != nil {
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("error %v does not wrap ErrPolicy", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, p := range got {
			if seen[p] {
				t.Fatalf("%q gave a duplicate %q", s, p)
			}
			seen[p] = true
			if _, ok := CanonicalPolicy(p); !ok && p != "mine" {
				t.Fatalf("%q gave unknown policy %q", s, p)
			}
			if _, err := StandardPolicy(p, PolicyParams{}); err != nil && p != "mine" {
				t.Fatalf("policy %q from the list cannot be built: %v", p, err)
			}
		}
		// Reading the result back gives the same list.
		again, err := ParsePolicyList(strings.Join(got, ","), func(n string) bool { return n == "mine" })
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("%q → %v → %v, %v", s, got, again, err)
		}
	})
}

func TestStandardPolicies(t *testing.T) {
	p := PolicyParams{Base: 10 * time.Millisecond, Max: time.Second}
	for _, name := range PolicyNames() {
		pol, err := StandardPolicy(name, p)
		if err != nil || pol.Name != name {
			t.Fatalf("%s: %+v %v", name, pol, err)
		}
		wantAttempts := 4
		if name == PolicyNoRetry {
			wantAttempts = 1
		}
		if pol.MaxAttempts != wantAttempts {
			t.Errorf("%s: %d attempts", name, pol.MaxAttempts)
		}
		if (pol.Budget != nil) != strings.Contains(name, "budget") || (pol.Breaker != nil) != strings.Contains(name, "breaker") {
			t.Errorf("%s: budget %v breaker %v", name, pol.Budget != nil, pol.Breaker != nil)
		}
	}
	exp, _ := StandardPolicy("no-jitter", p)
	s := exp.Backoff(nil)
	if e, ok := s.(backoff.Exponential); !ok || e.Jitter != backoff.None || e.Base != 10*time.Millisecond || s.Delay(3, 0) != 40*time.Millisecond {
		t.Errorf("exponential: %#v", s)
	}
	if pol, _ := StandardPolicy(PolicyFull, PolicyParams{MaxAttempts: -1}); pol.MaxAttempts != 0 {
		t.Errorf("MaxAttempts -1 gave %d, want 0 (no limit)", pol.MaxAttempts)
	}
	if pol, _ := StandardPolicy(PolicyImmediate, PolicyParams{MaxAttempts: -1}); pol.MaxAttempts != 4 {
		t.Errorf("immediate with no limit gave %d attempts, want 4", pol.MaxAttempts)
	}
	bad := budget.RatioConfig{MaxTokens: -1}
	if _, err := StandardPolicy(PolicyBudget, PolicyParams{Budget: &bad}); !errors.Is(err, ErrPolicy) {
		t.Errorf("invalid budget: %v", err)
	}
	if _, err := StandardPolicy("nope", p); !errors.Is(err, ErrPolicy) {
		t.Errorf("unknown policy: %v", err)
	}
}
