package config

import (
	"fmt"
	"sort"
	"strings"

	kg "github.com/stormguard/stormguard/keyed"
)

// MaxKeyedWindowBytes bounds the window memory of a count-window breaker
// split per key: calls × max_keys (keyed.DefaultMaxKeys when max_keys is
// left out) × one byte, what a count window keeps per call, at most 1 GiB.
// Every key's breaker holds its whole window from its first call, so a
// block beyond the bound (calls 16777216 with max_keys 1000 asks for
// 16 GiB) is refused, naming calls and max_keys.
const MaxKeyedWindowBytes = 1 << 30

// countWindowCallBytes is what a breaker's count window keeps per call:
// one outcome byte (breaker's countWindow ring of uint8 outcomes).
const countWindowCallBytes = 1

// keyedWindowProblem returns why the breaker block s asks for too much
// window memory, or "".
func keyedWindowProblem(s *BreakerSpec) string {
	if s == nil || s.Keys == nil || s.Config.Window.Calls <= 0 {
		return ""
	}
	keys, how := s.Keys.MaxKeys, ""
	if keys <= 0 {
		keys, how = kg.DefaultMaxKeys, " (the default, max_keys left out)"
	}
	n := int64(s.Config.Window.Calls) * int64(keys) * countWindowCallBytes
	if n <= MaxKeyedWindowBytes {
		return ""
	}
	return fmt.Sprintf("calls %d × max_keys %d%s is %s of count windows (%d bytes: one per call per key, each key's whole window held from its first call), above the bound of 1 GiB (%d bytes, config.MaxKeyedWindowBytes): lower calls or max_keys, or use a time_window",
		s.Config.Window.Calls, keys, how, fmtBytes(n), n, MaxKeyedWindowBytes)
}

// fmtBytes writes n bytes in the largest binary unit it fills.
func fmtBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for f := n; f >= 1024 && i < len(units)-1; f /= 1024 {
		i++
	}
	v := float64(n) / float64(int64(1)<<(10*i))
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v), "0"), ".") + " " + units[i]
}

// checkSpecs refuses a File whose specs would build nothing, or make a
// constructor panic, before any part is built: a File built in code, whose
// PolicySpecs Parse has not checked (Parse refuses all of these with
// their lines). It reports every problem at once, each naming its field:
// a nil spec, a Name other than the policy's key, per-key sizes
// keyed.Config refuses, a breaker config breaker.Config.Validate refuses
// or a keyed count window beyond MaxKeyedWindowBytes, an unknown budget
// kind, a budget config its kind's Validate refuses, shared on a budget
// not of kind ratio, an unknown limiter kind or throttle_on name, and a
// limiter config its kind's Validate refuses.
func checkSpecs(f *File) error {
	names := make([]string, 0, len(f.Policies))
	for name := range f.Policies {
		names = append(names, name)
	}
	sort.Strings(names)
	e := &Error{}
	add := func(path, format string, args ...any) {
		e.Problems = append(e.Problems, Problem{File: f.name, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for _, name := range names {
		s, at := f.Policies[name], "policies."+name
		if s == nil {
			add(at, "no spec: the policy's *PolicySpec is nil")
			continue
		}
		if s.Name != "" && s.Name != name {
			add(at, "PolicySpec.Name is %q but the policy's key is %q: leave Name empty or make it the key", s.Name, name)
		}
		for _, k := range []struct {
			field string
			ks    *KeySpec
		}{{"breaker", s.breakerKeys()}, {"budget", s.budgetKeys()}, {"nested.budget", s.nestedKeys()}, {"limiter", s.limiterKeys()}, {"hedge", s.hedgeKeys()}} {
			if k.ks == nil {
				continue
			}
			if err := (kg.Config{MaxKeys: k.ks.MaxKeys, Idle: k.ks.Idle}).Validate(); err != nil {
				add(at+"."+k.field, "%s", err)
			}
		}
		if b := s.Breaker; b != nil {
			if err := b.Config.Validate(); err != nil {
				add(at+".breaker", "%s", err)
			} else if msg := keyedWindowProblem(b); msg != "" {
				add(at+".breaker.calls", "%s", msg)
			}
		}
		if b := s.Budget; b != nil {
			if msg := budgetProblem(b); msg != "" {
				add(at+".budget", "%s", msg)
			}
		}
		if b := s.Nested.Budget; b != nil {
			if msg := budgetProblem(b); msg != "" {
				add(at+".nested.budget", "%s", msg)
			}
		}
		if l := s.Limiter; l != nil {
			if msg := limiterProblem(l); msg != "" {
				add(at+".limiter", "%s", msg)
			}
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// budgetProblem returns why a budget cannot be built from s, or "".
func budgetProblem(s *BudgetSpec) string {
	var err error
	switch s.Kind {
	case "ratio":
		err = s.Ratio.Validate()
	case "window", "concurrency":
		if s.Shared != "" {
			return fmt.Sprintf("shared %q: only a budget of kind ratio is shared by the fleet, not kind %s", s.Shared, s.Kind)
		}
		if s.Kind == "window" {
			err = s.Window.Validate()
		} else {
			err = s.Concurrency.Validate()
		}
	default:
		return fmt.Sprintf("kind %q is not one of ratio, window, concurrency", s.Kind)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// limiterProblem returns why a limiter cannot be built from s, or "".
func limiterProblem(s *LimiterSpec) string {
	var err error
	switch s.Kind {
	case LimiterSRE:
		err = s.SRE.Validate()
	case LimiterAWSAdaptive:
		err = s.Adaptive.Validate()
	default:
		return fmt.Sprintf("kind %q is not one of %s, %s", s.Kind, LimiterSRE, LimiterAWSAdaptive)
	}
	if err != nil {
		return err.Error()
	}
	if s.ThrottleOn != nil && len(s.ThrottleOn) == 0 {
		return "ThrottleOn is empty: it classifies nothing as throttling, and the limiter would never act (nil: the kind's default)"
	}
	for _, n := range s.ThrottleOn {
		if !contains(throttleOnNames, n) {
			return fmt.Sprintf("throttle_on %q is not one of %s", n, strings.Join(throttleOnNames, ", "))
		}
	}
	return ""
}
