package config

import (
	"fmt"
	"strings"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
	"go.yaml.in/yaml/v3"
)

// LimiterSpec is a policy's client-side limiter (retry.Policy.Limiter):
// Kind picks which config applies. Fields the file leaves out are zero
// (the throttle package's defaults), except that min_requests: 0 in the
// file, "no floor", is SRE.MinRequests -1. The Registry builds the
// limiter on its Clock and keeps the instance across reloads while its
// settings are unchanged, like budgets and breakers.
type LimiterSpec struct {
	Kind string // "sre" (throttle.SRE) or "aws_adaptive" (throttle.Adaptive)
	// SRE is the config of kind sre, given to throttle.NewSRE with the
	// Registry's Clock and the ThrottleOn classification as Overload.
	SRE throttle.SREConfig
	// Adaptive is the config of kind aws_adaptive, given to
	// throttle.NewAdaptive with the Registry's Clock and the ThrottleOn
	// classification as Throttled.
	Adaptive throttle.AdaptiveConfig
	// ThrottleOn names the classifications of an attempt's error that
	// count as a throttling or overload answer (SREConfig.Overload,
	// AdaptiveConfig.Throttled): any of them matching counts. nil: the
	// kind's default, [ThrottleOnAWS] for aws_adaptive and
	// [ThrottleOnOverload] for sre.
	ThrottleOn []string
	// Keys, when set (per: host or method), splits the limiter per key
	// (keyed.Limiters); nil: one limiter for every call. See KeySpec.
	Keys *KeySpec
}

// Classifications throttle_on can name.
const (
	// ThrottleOnAWS is awsretry.IsThrottle: the AWS throttling error codes
	// (awsretry.ThrottleErrorCodes, from an error's ErrorCode method, such as
	// an HTTP 400 ThrottlingException) and HTTP 429.
	ThrottleOnAWS = "aws"
	// ThrottleOnOverload is throttle.IsOverload: HTTP 429 and 503, errors
	// implementing throttle.OverloadReporter, and the retry package's
	// overload marker.
	ThrottleOnOverload = "overload"
)

var throttleOnNames = []string{ThrottleOnAWS, ThrottleOnOverload}

// ThrottleClassifier returns the classification the Registry gives the
// limiter it builds from s, as SREConfig.Overload (kind sre) or
// AdaptiveConfig.Throttled (kind aws_adaptive): the ThrottleOn
// classifications, any matching, or with ThrottleOn nil the kind's
// default (awsretry.IsThrottle for aws_adaptive, throttle.IsOverload for
// sre). An Overload or Throttled set in s.SRE or s.Adaptive is not used.
// A simulation of the policy (simtest) hands it the same answers.
func (s *LimiterSpec) ThrottleClassifier() func(error) bool {
	return throttleClassifier(s.Kind, s.ThrottleOn)
}

// throttleClassifier returns the classification names ask for (nil: the
// kind's default).
func throttleClassifier(kind string, names []string) func(error) bool {
	if names == nil {
		if kind == LimiterAWSAdaptive {
			return awsretry.IsThrottle
		}
		return throttle.IsOverload
	}
	fs := make([]func(error) bool, 0, len(names))
	for _, n := range names {
		switch n {
		case ThrottleOnAWS:
			fs = append(fs, awsretry.IsThrottle)
		case ThrottleOnOverload:
			fs = append(fs, throttle.IsOverload)
		}
	}
	if len(fs) == 1 {
		return fs[0]
	}
	return func(err error) bool {
		for _, f := range fs {
			if f(err) {
				return true
			}
		}
		return false
	}
}

// throttleOn reads throttle_on: one name or a list of names.
func (d *decoder) throttleOn(n *yaml.Node, path string) []string {
	one := func(v *yaml.Node, p string) (string, bool) {
		s := d.oneOf(v, p, throttleOnNames)
		return s, s != ""
	}
	if n.Kind != yaml.SequenceNode {
		if s, ok := one(n, path); ok {
			return []string{s}
		}
		return nil
	}
	if len(n.Content) == 0 {
		d.fail(n, path, "an empty list classifies nothing as throttling, and the limiter would never act: leave throttle_on out for the default, or name %s", strings.Join(throttleOnNames, ", "))
		return nil
	}
	var out []string
	d.list(n, path, func(_ int, v *yaml.Node, p string) {
		if s, ok := one(v, p); ok && !contains(out, s) {
			out = append(out, s)
		}
	})
	return out
}

// Limiter kinds, as the file spells them.
const (
	LimiterSRE         = "sre"
	LimiterAWSAdaptive = "aws_adaptive"
)

var limiterFields = map[string][]string{
	LimiterSRE:         {"kind", "k", "window", "buckets", "max_rejection", "min_requests", "throttle_on", "per", "max_keys", "idle"},
	LimiterAWSAdaptive: {"kind", "beta", "scale_constant", "smoothing", "min_fill_rate", "throttle_on", "per", "max_keys", "idle"},
}

// limiter reads a policy's limiter mapping. Every field left out takes
// the throttle package's default, except throttle_on (the kind's
// default: aws for aws_adaptive); min_requests: 0 means no floor.
func (d *decoder) limiter(n *yaml.Node, path string) *LimiterSpec {
	if n.Kind == yaml.MappingNode {
		if v := valueOf(n, "kind"); v != nil && v.Kind == yaml.ScalarNode && strings.ReplaceAll(v.Value, "-", "_") == LimiterAWSAdaptive && v.Value != LimiterAWSAdaptive {
			d.fail(v, join(path, "kind"), "%q is spelled %s", v.Value, LimiterAWSAdaptive)
			return nil
		}
	}
	kind, ok := kindOf(d, n, path, []string{LimiterSRE, LimiterAWSAdaptive})
	if !ok {
		return nil
	}
	l := &LimiterSpec{Kind: kind}
	before := len(d.problems)
	d.elsewhere = inAny(limiterFields)
	defer func() { d.elsewhere = nil }()
	d.fields(n, path, limiterFields[kind], func(key string, v *yaml.Node, fp string) {
		if key == "throttle_on" {
			l.ThrottleOn = d.throttleOn(v, fp)
			return
		}
		switch kind + "." + key {
		case "sre.k":
			l.SRE.K = d.number(v, fp, throttle.MinK, throttle.MaxK, false)
		case "sre.window":
			reported := len(d.problems)
			l.SRE.Window = d.duration(v, fp)
			if l.SRE.Window == 0 && len(d.problems) == reported {
				d.fail(v, fp, "must be positive (leave window out for the default, %v)", throttle.DefaultWindow)
			}
		case "sre.buckets":
			l.SRE.Buckets = d.integer(v, fp, 1, throttle.MaxBuckets)
		case "sre.max_rejection":
			l.SRE.MaxRejection = d.number(v, fp, 0, 1, true)
		case "sre.min_requests":
			reported := len(d.problems)
			l.SRE.MinRequests = d.integer(v, fp, 0, 1<<30)
			if l.SRE.MinRequests == 0 && len(d.problems) == reported {
				l.SRE.MinRequests = -1 // an explicit 0 means no floor
			}
		case "aws_adaptive.beta":
			l.Adaptive.Beta = d.number(v, fp, 0, 1, true)
			if l.Adaptive.Beta == 1 {
				d.fail(v, fp, "1 is outside (0, 1): the rate must drop after a throttling answer")
				l.Adaptive.Beta = 0
			}
		case "aws_adaptive.scale_constant":
			l.Adaptive.ScaleConstant = d.number(v, fp, 0, 1e6, true)
		case "aws_adaptive.smoothing":
			l.Adaptive.Smoothing = d.number(v, fp, 0, 1, true)
		case "aws_adaptive.min_fill_rate":
			l.Adaptive.MinFillRate = d.number(v, fp, 0, 1e9, true)
		}
	})
	if len(d.problems) > before {
		return l
	}
	var err error
	switch kind {
	case LimiterSRE:
		err = l.SRE.Validate()
	case LimiterAWSAdaptive:
		err = l.Adaptive.Validate()
	}
	if err != nil {
		d.fail(n, path, "%s", err)
	}
	return l
}

// limiterKey identifies a limiter's settings: a limiter is kept across a
// reload while its key is unchanged.
func limiterKey(s *LimiterSpec) string {
	switch s.Kind {
	case LimiterSRE:
		c := s.SRE
		return fmt.Sprintf("sre %v %d %v %v %d %v", c.Window, c.Buckets, c.K, c.MaxRejection, c.MinRequests, s.ThrottleOn)
	case LimiterAWSAdaptive:
		c := s.Adaptive
		return fmt.Sprintf("aws_adaptive %v %v %v %v %v", c.Beta, c.ScaleConstant, c.Smoothing, c.MinFillRate, s.ThrottleOn)
	}
	return s.Kind
}

func (r *Registry) newLimiter(s *LimiterSpec) retry.Limiter {
	switch s.Kind {
	case LimiterSRE:
		c := s.SRE
		c.Clock = r.opts.Clock
		c.Overload = s.ThrottleClassifier()
		return throttle.NewSRE(c)
	case LimiterAWSAdaptive:
		c := s.Adaptive
		c.Clock = r.opts.Clock
		c.Throttled = s.ThrottleClassifier()
		return throttle.NewAdaptive(c)
	}
	return nil
}

// Policy presets: a whole policy after a published rule set.
const (
	// PresetAWSStandard2026 is the AWS SDKs' standard retry mode of 2026
	// (awsretry.Rules): 3 attempts, the awsretry.Standard2026 quota, the
	// rules' backoff (50 ms base, 1 s after throttling, 20 s cap, full
	// jitter, x-amz-retry-after clamped) and awsretry.IsRetryable.
	PresetAWSStandard2026 = "aws_standard_2026"
	// PresetAWSStandard2026DynamoDB is the same for DynamoDB
	// (awsretry.Rules{DynamoDB: true}): 4 attempts and a 25 ms base; the
	// quota is the same.
	PresetAWSStandard2026DynamoDB = "aws_standard_2026_dynamodb"
	// PresetAWSStandardLegacy is the AWS SDKs' standard mode before 2026
	// (awsretry.LegacyRules): 3 attempts, the awsretry.StandardLegacy quota, a
	// 1 s base with full jitter and a 20 s cap, awsretry.IsRetryable.
	PresetAWSStandardLegacy = "aws_standard_legacy"
)

var policyPresets = []string{PresetAWSStandard2026, PresetAWSStandard2026DynamoDB, PresetAWSStandardLegacy}

// presetRules returns the attempt limit and backoff of a policy preset.
// Its classification is awsretry.IsRetryable.
func presetRules(name string) (attempts int, b backoff.Strategy) {
	switch name {
	case PresetAWSStandard2026:
		r := awsretry.Rules{}
		return r.Attempts(), r
	case PresetAWSStandard2026DynamoDB:
		r := awsretry.Rules{DynamoDB: true}
		return r.Attempts(), r
	}
	return awsretry.MaxAttempts, awsretry.LegacyRules{}
}

// presetBudget returns the quota of a policy preset.
func presetBudget(name string) budget.RatioConfig {
	if name == PresetAWSStandardLegacy {
		return awsretry.StandardLegacy()
	}
	return awsretry.Standard2026()
}

// Budget presets of kind ratio, as the file spells them.
var budgetPresets = []string{"grpc", "aws_standard_2026", "aws_standard_legacy", "aws_standard", "ten_percent"}

// budgetPresetHints answers spellings of the AWS presets that are not the
// file's, with the one to write.
var budgetPresetHints = map[string]string{
	"aws":                        "aws_standard_legacy (aws_standard is the same)",
	"aws_2026":                   "aws_standard_2026",
	"aws_legacy":                 "aws_standard_legacy",
	"aws_2026_dynamodb":          "aws_standard_2026: DynamoDB's rules share the 2026 quota and differ only in attempts and backoff (the policy preset aws_standard_2026_dynamodb)",
	"aws_standard_2026_dynamodb": "aws_standard_2026: DynamoDB's rules share the 2026 quota and differ only in attempts and backoff (the policy preset aws_standard_2026_dynamodb)",
}

// budgetPreset returns the quota a budget preset names.
func (d *decoder) budgetPreset(n *yaml.Node, path string) (budget.RatioConfig, bool) {
	s, ok := d.scalar(n, path)
	if !ok {
		return budget.RatioConfig{}, false
	}
	switch s {
	case "grpc":
		return budget.GRPC(), true
	case "aws_standard_2026":
		return awsretry.Standard2026(), true
	case "aws_standard", "aws_standard_legacy":
		return awsretry.StandardLegacy(), true
	case "ten_percent":
		return budget.TenPercent(), true
	}
	canon := strings.ReplaceAll(s, "-", "_")
	if hint, ok := budgetPresetHints[canon]; ok {
		d.fail(n, path, "%q is not a preset; write %s", s, hint)
	} else if contains(budgetPresets, canon) {
		d.fail(n, path, "%q is spelled %s", s, canon)
	} else {
		d.fail(n, path, "%q is not one of %s", s, strings.Join(budgetPresets, ", "))
	}
	return budget.RatioConfig{}, false
}

// preset reads a policy's preset name.
func (d *decoder) preset(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if contains(policyPresets, s) {
		return s
	}
	canon := strings.ReplaceAll(s, "-", "_")
	switch {
	case contains(policyPresets, canon):
		d.fail(n, path, "%q is spelled %s", s, canon)
	case canon == "aws_2026" || canon == "aws_standard" || canon == "aws_legacy" || canon == "aws":
		d.fail(n, path, "%q is not a policy preset (one of %s; the budget presets are another list)", s, strings.Join(policyPresets, ", "))
	default:
		d.fail(n, path, "%q is not one of %s", s, strings.Join(policyPresets, ", "))
	}
	return ""
}
