package config

import (
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"go.yaml.in/yaml/v3"
)

var budgetFields = map[string][]string{
	"ratio": {"kind", "preset", "max_tokens", "initial_tokens", "start_empty", "refill", "retry_refill",
		"refund_retry_success", "retry_cost", "timeout_cost", "failure_cost", "throttle_cost", "threshold", "shared", "per", "max_keys", "idle"},
	"window":      {"kind", "window", "ratio", "min_retries_per_second", "buckets", "per", "max_keys", "idle"},
	"concurrency": {"kind", "ratio", "min_concurrency", "per", "max_keys", "idle"},
}

// renamedKeys maps keys of earlier versions of the format to their names
// now. Shares are fractions whose key says so (ratio), as in the Go
// fields; an old key is refused with its new name rather than read with a
// unit it may have been written in.
var renamedKeys = map[string]string{
	"percent":        "ratio",
	"failure_rate":   "failure_ratio",
	"slow_call_rate": "slow_call_ratio",
}

func kindOf(d *decoder, n *yaml.Node, path string, kinds []string) (string, bool) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, not %s", describe(n))
		return "", false
	}
	if v := valueOf(n, "kind"); v != nil {
		k := d.oneOf(v, join(path, "kind"), kinds)
		return k, k != ""
	}
	d.fail(n, join(path, "kind"), "missing: one of %s", strings.Join(kinds, ", "))
	return "", false
}

func (d *decoder) budget(n *yaml.Node, path string) *BudgetSpec {
	kind, ok := kindOf(d, n, path, []string{"ratio", "window", "concurrency"})
	if !ok {
		return nil
	}
	b := &BudgetSpec{Kind: kind}
	before := len(d.problems)
	// A preset is applied first, so that explicit fields override it.
	if v := valueOf(n, "preset"); v != nil && kind == "ratio" {
		if c, ok := d.budgetPreset(v, join(path, "preset")); ok {
			b.Ratio = c
		}
	}
	d.elsewhere, d.renamed = inAny(budgetFields), renamedKeys
	defer func() { d.elsewhere, d.renamed = nil, nil }()
	var initialNode, startEmptyNode *yaml.Node
	d.fields(n, path, budgetFields[kind], func(key string, v *yaml.Node, fp string) {
		switch kind + "." + key {
		case "ratio.shared":
			b.Shared = d.shared(v, fp)
		case "ratio.max_tokens":
			b.Ratio.MaxTokens = d.number(v, fp, 0, 1e9, true)
		case "ratio.initial_tokens":
			reported := len(d.problems)
			b.Ratio.InitialTokens = d.number(v, fp, 0, 1e9, false)
			if b.Ratio.InitialTokens == 0 && len(d.problems) == reported {
				initialNode = v // an explicit 0: the bucket starts empty
			}
		case "ratio.start_empty":
			startEmptyNode = v
			b.Ratio.StartEmpty = d.boolean(v, fp)
		case "ratio.refill":
			b.Ratio.Refill = d.number(v, fp, 0, 1e9, true)
		case "ratio.retry_refill":
			b.Ratio.RetryRefill = d.number(v, fp, 0, 1e9, false)
		case "ratio.refund_retry_success":
			b.Ratio.RefundRetrySuccess = d.boolean(v, fp)
		case "ratio.retry_cost":
			b.Ratio.RetryCost = d.number(v, fp, 0, 1e9, true)
		case "ratio.timeout_cost":
			b.Ratio.TimeoutCost = d.number(v, fp, 0, 1e9, true)
		case "ratio.failure_cost":
			b.Ratio.FailureCost = d.number(v, fp, 0, 1e9, true)
		case "ratio.throttle_cost":
			b.Ratio.ThrottleCost = d.number(v, fp, 0, 1e9, true)
		case "ratio.threshold":
			b.Ratio.Threshold = d.number(v, fp, 0, 1e9, false)
		case "window.window":
			reported := len(d.problems)
			b.Window.Window = d.duration(v, fp)
			if b.Window.Window == 0 && len(d.problems) == reported {
				d.fail(v, fp, "must be positive (leave window out for the default, %s)", fmtDuration(budget.DefaultWindow))
			}
		case "window.ratio", "concurrency.ratio":
			p := d.shareOrNone(v, fp, kind)
			b.Window.Ratio, b.Concurrency.Ratio = p, p
		case "window.min_retries_per_second":
			if isNone(v) {
				b.Window.MinRetriesPerSecond = -1
				break
			}
			if d.negative(v, fp) {
				break
			}
			reported := len(d.problems)
			b.Window.MinRetriesPerSecond = d.number(v, fp, 0, 1e6, false)
			if b.Window.MinRetriesPerSecond == 0 && len(d.problems) == reported {
				b.Window.MinRetriesPerSecond = -1 // an explicit 0 means no floor
			}
		case "window.buckets":
			b.Window.Buckets = d.integer(v, fp, 1, budget.MaxBuckets)
		case "concurrency.min_concurrency":
			if isNone(v) {
				b.Concurrency.MinConcurrency = -1
				break
			}
			if d.negative(v, fp) {
				break
			}
			reported := len(d.problems)
			b.Concurrency.MinConcurrency = d.integer(v, fp, 0, 1<<20)
			if b.Concurrency.MinConcurrency == 0 && len(d.problems) == reported {
				b.Concurrency.MinConcurrency = -1 // an explicit 0 means none
			}
		}
	})
	if len(d.problems) > before {
		return b
	}
	if initialNode != nil {
		// initial_tokens: 0 is a bucket that starts with no tokens, which
		// RatioConfig spells StartEmpty (its InitialTokens 0 is a full one).
		if startEmptyNode != nil && !b.Ratio.StartEmpty {
			d.fail(initialNode, join(path, "initial_tokens"), "0 is a bucket that starts empty, but start_empty is false: drop one of them")
			return b
		}
		b.Ratio.StartEmpty = true
	}
	if kind == "ratio" && b.Ratio.ThrottleCost > 0 && b.Ratio.Throttles == nil {
		// A file's throttle_cost is charged for AWS throttling codes too, as
		// before the AWS rules moved to awsretry: awsretry.IsThrottle is
		// retry.IsThrottle (429, a ThrottleReporter) plus those codes.
		b.Ratio.Throttles = awsretry.Throttles{}
	}
	var err error
	switch kind {
	case "ratio":
		err = b.Ratio.Validate()
	case "window":
		err = b.Window.Validate()
	case "concurrency":
		err = b.Concurrency.Validate()
	}
	if err != nil {
		d.fail(n, path, "%s", err)
	}
	return b
}

// isNone reports whether n is the word none, a file's spelling of the Go
// API's "none" value (a negative floor or share) where 0 would be a number.
func isNone(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Value == "none"
}

// negative reports (and refuses) a negative number where the file spells
// the Go API's negative value none.
func (d *decoder) negative(n *yaml.Node, path string) bool {
	if n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Value, "-") {
		d.fail(n, path, "%q must not be negative (write none for none)", n.Value)
		return true
	}
	return false
}

// shareOrNone reads the ratio of a window or concurrency budget: a
// fraction in (0, 1], or none (-1: no share of requests, only the floor).
// 0 is refused: it is not a share, and the Go field reads it as the
// default.
func (d *decoder) shareOrNone(n *yaml.Node, path, kind string) float64 {
	if isNone(n) {
		return -1
	}
	if d.negative(n, path) {
		return 0
	}
	if v, err := strconv.ParseFloat(n.Value, 64); err == nil && v == 0 && n.Kind == yaml.ScalarNode {
		floor, def := "min_retries_per_second", budget.DefaultWindowRatio
		if kind == "concurrency" {
			floor, def = "min_concurrency", budget.DefaultConcurrencyRatio
		}
		d.fail(n, path, "0 is refused: write none for no share of requests (only %s), or leave ratio out for the default (%v)", floor, def)
		return 0
	}
	return d.number(n, path, 0, 1, true)
}

var breakerCommon = []string{"kind", "open_timeout", "max_open_timeout", "open_timeout_multiplier",
	"open_jitter", "max_probes", "success_threshold", "shared", "per", "max_keys", "idle"}

var breakerFields = map[string][]string{
	"consecutive":  append([]string{"failures"}, breakerCommon...),
	"count_window": append([]string{"calls", "min_calls", "failure_ratio", "slow_call_duration", "slow_call_ratio"}, breakerCommon...),
	"time_window":  append([]string{"window", "buckets", "min_calls", "failure_ratio", "slow_call_duration", "slow_call_ratio"}, breakerCommon...),
}

func (d *decoder) breaker(n *yaml.Node, path string) *BreakerSpec {
	kind, ok := kindOf(d, n, path, []string{"consecutive", "count_window", "time_window"})
	if !ok {
		return nil
	}
	b := &BreakerSpec{Kind: kind}
	c := &b.Config
	before := len(d.problems)
	d.elsewhere, d.renamed = inAny(breakerFields), renamedKeys
	defer func() { d.elsewhere, d.renamed = nil, nil }()
	d.fields(n, path, breakerFields[kind], func(key string, v *yaml.Node, fp string) {
		switch key {
		case "shared":
			b.Shared = d.shared(v, fp)
		case "failures":
			c.ConsecutiveFailures = d.integer(v, fp, 1, 1<<20)
		case "calls":
			c.Window.Calls = d.integer(v, fp, 1, 1<<24)
		case "window":
			reported := len(d.problems)
			c.Window.Duration = d.duration(v, fp)
			if c.Window.Duration == 0 && len(d.problems) == reported {
				d.fail(v, fp, "must be positive")
			}
		case "buckets":
			c.Window.Buckets = d.integer(v, fp, 1, 4096)
		case "min_calls":
			c.Window.MinCalls = d.integer(v, fp, 1, 1<<24)
		case "failure_ratio":
			c.Window.FailureRatio = d.number(v, fp, 0, 1, true)
		case "slow_call_duration":
			c.Window.SlowCallDuration = d.duration(v, fp)
		case "slow_call_ratio":
			c.Window.SlowCallRatio = d.number(v, fp, 0, 1, true)
		case "open_timeout":
			c.OpenTimeout = d.positive(v, fp, breaker.DefaultOpenTimeout)
		case "max_open_timeout":
			c.MaxOpenTimeout = d.duration(v, fp)
		case "open_timeout_multiplier":
			c.OpenTimeoutMultiplier = d.number(v, fp, 1, 1000, false)
		case "open_jitter":
			c.OpenJitter = d.number(v, fp, 0, 1, false)
			if c.OpenJitter == 0 {
				c.OpenJitter = -1 // an explicit 0 means no jitter
			}
		case "max_probes":
			c.MaxProbes = d.integer(v, fp, 1, 1<<20)
		case "success_threshold":
			c.SuccessThreshold = d.integer(v, fp, 1, 1<<20)
		}
	})
	if len(d.problems) > before {
		return b
	}
	if kind == "count_window" && c.Window.Calls == 0 {
		d.fail(n, join(path, "calls"), "missing: a count window needs the number of calls")
		return b
	}
	if kind == "time_window" && c.Window.Duration == 0 {
		d.fail(n, join(path, "window"), "missing: a time window needs its duration")
		return b
	}
	if c.Window.SlowCallRatio > 0 && c.Window.SlowCallDuration == 0 {
		d.fail(n, join(path, "slow_call_duration"), "missing: slow_call_ratio needs slow_call_duration")
		return b
	}
	if c.MaxOpenTimeout > 0 && c.MaxOpenTimeout < c.OpenTimeout {
		d.fail(n, join(path, "max_open_timeout"), "%v is below open_timeout %v", c.MaxOpenTimeout, c.OpenTimeout)
		return b
	}
	if err := c.Validate(); err != nil {
		d.fail(n, path, "%s", err)
	}
	return b
}

func inAny(fields map[string][]string) func(string) bool {
	return func(key string) bool {
		for _, list := range fields {
			if contains(list, key) {
				return true
			}
		}
		return false
	}
}
