package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	kg "github.com/stormguard/stormguard/keyed"
)

// MaxKeyedWindowBytes bounds the window memory of a window breaker split
// per key, at most 1 GiB. A keyed group builds a breaker for each of
// max_keys (keyed.DefaultMaxKeys when max_keys is left out) live keys
// plus its default and overflow members, and each breaker holds its
// whole window from its first call: a count window one byte per call
// (calls), a time window 32 bytes per bucket (buckets, left out:
// breaker.DefaultBuckets). A block whose windows, times max_keys + 2,
// exceed the bound (calls 16777216 with max_keys 1000 asks for 16 GiB,
// buckets 4096 with max_keys 1000000 for 125 GiB) is refused, naming
// the field and max_keys.
const MaxKeyedWindowBytes = 1 << 30

// countWindowCallBytes is what a breaker's count window keeps per call:
// one outcome byte (breaker's countWindow ring of uint8 outcomes).
const countWindowCallBytes = 1

// timeWindowBucketBytes is what a breaker's time window keeps per bucket:
// breaker's bucket, an index and three counts of 8 bytes each.
const timeWindowBucketBytes = 32

// keyedWindowProblem returns why the breaker block s asks for too much
// window memory, and the field to name (calls or buckets), or "", "".
func keyedWindowProblem(s *BreakerSpec) (field, msg string) {
	if s == nil || s.Keys == nil {
		return "", ""
	}
	w := s.Config.Window
	var per int64
	var size string
	switch {
	case w.Calls > 0:
		field, per = "calls", int64(w.Calls)*countWindowCallBytes
		size = fmt.Sprintf("calls %d", w.Calls)
	case w.Duration > 0:
		buckets, how := w.Buckets, ""
		if buckets <= 0 {
			buckets, how = breaker.DefaultBuckets, " (the default, buckets left out)"
		}
		field, per = "buckets", int64(buckets)*timeWindowBucketBytes
		size = fmt.Sprintf("buckets %d%s", buckets, how)
	default:
		return "", ""
	}
	keys, how := s.Keys.MaxKeys, ""
	if keys <= 0 {
		keys, how = kg.DefaultMaxKeys, " (the default, max_keys left out)"
	}
	n := per * (int64(keys) + 2)
	if n <= MaxKeyedWindowBytes {
		return "", ""
	}
	if field == "calls" {
		return field, fmt.Sprintf("%s × (max_keys %d%s + 2, the group's default and overflow members) is %s of count windows (%d bytes: one per call per breaker, each breaker's whole window held from its first call), above the bound of 1 GiB (%d bytes, config.MaxKeyedWindowBytes): lower calls or max_keys, or use a time_window of few buckets (%d bytes per bucket per breaker)",
			size, keys, how, fmtBytes(n), n, MaxKeyedWindowBytes, timeWindowBucketBytes)
	}
	return field, fmt.Sprintf("%s × (max_keys %d%s + 2, the group's default and overflow members) is %s of time windows (%d bytes: %d per bucket per breaker, each breaker's whole window held from its first call), above the bound of 1 GiB (%d bytes, config.MaxKeyedWindowBytes): lower buckets or max_keys",
		size, keys, how, fmtBytes(n), n, timeWindowBucketBytes, MaxKeyedWindowBytes)
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
// a nil spec, a Name other than the policy's key, a backoff backoff.New
// refuses (or Params without a Strategy), a per other than host or method
// or differing between the keyed parts of one policy, hedge Keys without
// Adaptive, per-key sizes
// keyed.Config refuses, a breaker config breaker.Config.Validate refuses
// or a keyed window beyond MaxKeyedWindowBytes, an unknown budget kind, a
// budget config its kind's Validate refuses, shared on a budget not of
// kind ratio, an unknown limiter kind or throttle_on name, a limiter
// config its kind's Validate refuses, an operation or default naming a
// policy the File does not hold, and an admission block that is nil, has
// an unknown Algorithm or a config its package refuses.
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
		if msg := backoffProblem(s); msg != "" {
			add(at+".backoff", "%s", msg)
		}
		per, perAt := "", ""
		for _, k := range []struct {
			field string
			ks    *KeySpec
		}{{"breaker", s.breakerKeys()}, {"budget", s.budgetKeys()}, {"nested.budget", s.nestedKeys()}, {"limiter", s.limiterKeys()}, {"hedge", s.hedgeKeys()}} {
			if k.ks == nil {
				continue
			}
			switch {
			case k.ks.Per != PerHost && k.ks.Per != PerMethod:
				add(at+"."+k.field+".per", "%q is not %s or %s (nil Keys: one part for every call)", k.ks.Per, PerHost, PerMethod)
			case per != "" && k.ks.Per != per:
				add(at+"."+k.field+".per", "%s differs from %s.per: %s: the keyed parts of one policy share each call's one key", k.ks.Per, perAt, per)
			case per == "":
				per, perAt = k.ks.Per, at+"."+k.field
			}
			if err := (kg.Config{MaxKeys: k.ks.MaxKeys, Idle: k.ks.Idle}).Validate(); err != nil {
				add(at+"."+k.field, "%s", err)
			}
		}
		if h := s.Hedge; h != nil && h.Keys != nil && h.Adaptive == nil {
			add(at+".hedge.per", "a fixed delay is the same for every key: Keys needs Adaptive (one delay from each key's latencies)")
		}
		if b := s.Breaker; b != nil {
			if err := b.Config.Validate(); err != nil {
				add(at+".breaker", "%s", err)
			} else if field, msg := keyedWindowProblem(b); msg != "" {
				add(at+".breaker."+field, "%s", msg)
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
	for _, op := range slices.Sorted(maps.Keys(f.Operations)) {
		if name := f.Operations[op]; f.Policies[name] == nil {
			add("operations."+op, "policy %q is not defined (defined: %s)", name, strings.Join(policyNames(f), ", "))
		}
	}
	if f.Default != "" && f.Policies[f.Default] == nil {
		add("default", "policy %q is not defined", f.Default)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Admission)) {
		if msg := admissionProblem(f.Admission[name]); msg != "" {
			add("admission."+name, "%s", msg)
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// backoffProblem returns why the backoff of s cannot be built as given,
// or "". An empty Strategy is the policy's preset's backoff, or with no
// preset retry.DefaultBackoff, and then takes no Params.
func backoffProblem(s *PolicySpec) string {
	b := s.Backoff
	if b.Strategy == "" {
		if b.Params != (backoff.Params{}) {
			return "Params are given without a Strategy, and would be ignored: name the strategy (such as full_jitter)"
		}
		return ""
	}
	if _, ok := backoff.Lookup(b.Strategy); !ok {
		return fmt.Sprintf("strategy %q is not a registered strategy (known: %s)", b.Strategy, strings.Join(backoff.Names(), ", "))
	}
	if _, err := backoff.New(b.Strategy, b.Params); err != nil {
		return strings.TrimPrefix(err.Error(), "backoff: ")
	}
	return ""
}

// admissionProblem returns why the admission block s cannot be built as
// given, or "": a nil block, an Algorithm that is not one, or a config
// its package refuses (which the Registry would otherwise replace by the
// default settings).
func admissionProblem(s *AdmissionSpec) string {
	if s == nil {
		return "no spec: the block's *AdmissionSpec is nil"
	}
	if !contains(admissionAlgorithms, s.Algorithm) {
		return fmt.Sprintf("algorithm %q is not one of %s", s.Algorithm, strings.Join(admissionAlgorithms, ", "))
	}
	if _, err := s.NewLimiter(nil); err != nil {
		return err.Error()
	}
	return ""
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
