package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// File is a validated policy file.
type File struct {
	// Version identifies the content: the first 12 hex digits of its
	// SHA-256. Two files with the same bytes have the same version.
	Version string
	// Policies by name.
	Policies map[string]*PolicySpec
	// Operations maps operation names to policy names.
	Operations map[string]string
	// Default is the policy for names that are neither operations nor
	// policies: the file's "default" key, else a policy named "default",
	// else empty.
	Default string
	// Admission holds the server-side admission blocks by name (see
	// AdmissionSpec and Registry.Admission).
	Admission map[string]*AdmissionSpec

	// Where Parse found things, for Apply's messages.
	name           string
	policiesLine   int
	operationsLine int
}

// PolicyOf returns the key under Policies of the policy that serves the
// operation name, as Registry.Policy resolves it: the policy name lists
// under Operations, else name itself if it is a policy, else Default. It
// returns "" when that key holds no policy (an operation listed with a
// policy the File does not hold, or no default), so a File built in code
// with such an operation is resolved as Apply checks it: uncovered.
func (f *File) PolicyOf(name string) string {
	key, ok := f.Operations[name]
	if !ok {
		if _, isPolicy := f.Policies[name]; isPolicy {
			return name
		}
		key = f.Default
	}
	if f.Policies[key] == nil {
		return ""
	}
	return key
}

// covers reports whether the file gives the operation name a policy.
func (f *File) covers(name string) bool { return f.PolicyOf(name) != "" }

// PolicySpec is one named policy as written in the file.
type PolicySpec struct {
	// Name is the policy's key under the file's policies mapping, as Parse
	// sets it. In a File built in code it may be left empty (the key
	// names the policy); Apply refuses a Name other than its key.
	Name string
	// MaxAttempts is retry.DefaultMaxAttempts when the file leaves
	// max_attempts out, retry.Unlimited for "max_attempts: unlimited".
	MaxAttempts int
	// MaxElapsed, AttemptTimeout, MinAttemptTime and MaxRetryAfter are
	// the retry.Policy fields of those names, read from max_elapsed,
	// attempt_timeout, min_attempt_time and max_retry_after (at most
	// MaxDuration, never negative but for MaxRetryAfter -1, which
	// max_retry_after: ignore gives: server advice is ignored). 0, also
	// when the file leaves them out, means what it means there: no bound
	// for the first two, no least time, DefaultMaxRetryAfter.
	MaxElapsed     time.Duration
	AttemptTimeout time.Duration
	MinAttemptTime time.Duration
	MaxRetryAfter  time.Duration
	// Backoff is the backoff block; full_jitter with the strategy's
	// defaults when the file leaves it out (and no preset supplies it).
	Backoff BackoffSpec
	// RetryOn is the retry_on block; empty lists when the file leaves it
	// out.
	RetryOn RetryOn
	Budget  *BudgetSpec  // nil: no budget
	Breaker *BreakerSpec // nil: no breaker
	Nested  NestedSpec   // the layer rule; zero: one_layer
	Limiter *LimiterSpec // nil: no limiter
	Hedge   *HedgeSpec   // nil: no hedging (Handle.Hedger does not hedge)
	// Preset names the rule set the policy starts from (PresetAWSStandard2026
	// and the others), "" for none. Parse has already applied it to
	// MaxAttempts and Budget where the file leaves them out; a preset's
	// backoff is not a registered strategy, so Backoff.Strategy is "" when
	// the preset supplies it (the Registry sets the preset's
	// backoff.Strategy, which implements retry.ErrorBackoff). The preset's
	// classification, awsretry.IsRetryable, is the built policy's Classify
	// unless Options.Classify or retry_on.http_status gives another.
	Preset string
}

// BackoffSpec names a registered backoff strategy and its parameters.
type BackoffSpec struct {
	// Strategy is a name known to backoff.Lookup; default "full_jitter";
	// "" when the policy's preset supplies the backoff.
	Strategy string
	// Params are the block's base, max, step, multiplier, jitter and
	// factor, given to backoff.New; zero where the file leaves them out,
	// except that Parse sets Base to backoff.DefaultBase for strategy
	// constant without base (backoff.Constant has no default wait; the
	// other built-in strategies read a zero Base as DefaultBase).
	Params backoff.Params
}

// RetryOn lists, for the HTTP and gRPC adapters, which response statuses
// are retryable. Empty lists mean the adapters' defaults.
type RetryOn struct {
	// HTTPStatus lists the statuses (100 to 599) whose responses are
	// retried; a response with any other status is not, and a failure
	// without a response is classified by httpretry.DefaultClassifier
	// (see PolicySpec.HTTPClassifier). nil or empty: the adapter's
	// default classification.
	HTTPStatus []int
	GRPCCodes  []string // canonical upper-case names, e.g. "UNAVAILABLE"
}

// BudgetSpec is a retry budget: Kind picks which config applies.
type BudgetSpec struct {
	Kind string // "ratio", "window" or "concurrency"
	// Ratio is the config of kind ratio (budget.NewRatio, or the shared
	// store's budget): the block's preset, if any, then the file's
	// fields; the fields neither sets are zero, budget.RatioConfig's
	// defaults. initial_tokens: 0 is StartEmpty (a bucket that starts
	// with no tokens; RatioConfig's InitialTokens 0 is a full one). A
	// throttle_cost above 0 makes Throttles awsretry.Throttles, unless
	// the preset set one.
	Ratio budget.RatioConfig
	// Window is the config of kind window (budget.NewWindow, on the
	// Registry's Clock); fields the file leaves out are zero, the
	// defaults. min_retries_per_second: 0 or none is
	// MinRetriesPerSecond -1 (no floor), ratio: none is Ratio -1 (only
	// the floor); window is positive when the file gives it.
	Window budget.WindowConfig
	// Concurrency is the config of kind concurrency
	// (budget.NewConcurrency); fields the file leaves out are zero, the
	// defaults. min_concurrency: 0 or none is MinConcurrency -1 (none
	// always allowed), ratio: none is Ratio -1. A ratio key sets both
	// Window.Ratio and Concurrency.Ratio.
	Concurrency budget.ConcurrencyConfig
	// Shared names the SharedStore in Options.Shared that builds the
	// budget, shared by the fleet (kind ratio only); "" for a budget of
	// this process.
	Shared string
	// Keys, when set (per: host or method), splits the budget per key
	// (keyed.Budgets); nil: one budget for every call. See KeySpec.
	Keys *KeySpec
}

// BreakerSpec is a circuit breaker's settings.
type BreakerSpec struct {
	Kind string // "consecutive", "count_window" or "time_window"
	// Config is the breaker's config, given to breaker.New (or the
	// shared store) with the Registry's Clock; Kind says which of its
	// trip rules the file could set (ConsecutiveFailures, or Window by
	// calls or by duration). Fields the file leaves out are zero, the
	// breaker package's defaults, except that open_jitter: 0 in the file,
	// "no jitter", is OpenJitter -1.
	Config breaker.Config
	// Shared names the SharedStore in Options.Shared that builds the
	// breaker, shared by the fleet; "" for a breaker of this process.
	Shared string
	// Keys, when set (per: host or method), splits the breaker per key
	// (keyed.Breakers); nil: one breaker for every call. See KeySpec.
	Keys *KeySpec
}

// Load reads and validates the policy file at path (YAML, or JSON, which
// YAML reads too). On any problem it returns an *Error listing all of them
// with file, line and field.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse validates the policy file content data; name is used in messages.
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{file: name}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		d.problems = append(d.problems, syntaxProblem(name, err))
		return nil, &Error{d.problems}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		d.fail(nil, "", "the file is empty: it needs a policies mapping")
		return nil, &Error{d.problems}
	}
	if p, ok := secondDocument(name, data); ok {
		return nil, &Error{[]Problem{p}}
	}
	f := &File{Version: versionOf(data), Policies: map[string]*PolicySpec{}, Operations: map[string]string{}, name: name}
	doc := root.Content[0]
	f.policiesLine, f.operationsLine = keyLine(doc, "policies"), keyLine(doc, "operations")
	if f.policiesLine == 0 {
		f.policiesLine = doc.Line
	}
	if f.operationsLine == 0 { // where operations would go
		f.operationsLine = f.policiesLine
	}
	var opsNode, defNode *yaml.Node
	d.fields(doc, "", []string{"policies", "operations", "default", "admission"}, func(key string, v *yaml.Node, path string) {
		switch key {
		case "policies":
			if v.Kind == yaml.MappingNode && len(v.Content) == 0 {
				d.fail(v, path, "%s", noPolicy)
				return
			}
			d.fields(v, path, nil, func(name string, pv *yaml.Node, p string) {
				f.Policies[name] = d.policy(name, pv, p)
			})
		case "operations":
			opsNode = v
		case "default":
			defNode = v
		case "admission":
			f.Admission = d.admission(v, path)
		}
	})
	if doc.Kind == yaml.MappingNode && len(f.Policies) == 0 && valueOf(doc, "policies") == nil {
		d.fail(doc, "policies", "missing: the file must define at least one policy")
	}
	if opsNode != nil {
		d.fields(opsNode, "operations", nil, func(op string, v *yaml.Node, p string) {
			name, ok := d.scalar(v, p)
			if !ok {
				return
			}
			if _, ok := f.Policies[name]; !ok {
				d.fail(v, p, "policy %q is not defined (defined: %s)", name, strings.Join(policyNames(f), ", "))
				return
			}
			f.Operations[op] = name
		})
	}
	if defNode != nil {
		if name, ok := d.scalar(defNode, "default"); ok {
			if _, ok := f.Policies[name]; !ok {
				d.fail(defNode, "default", "policy %q is not defined", name)
			}
			f.Default = name
		}
	} else if _, ok := f.Policies["default"]; ok {
		f.Default = "default"
	}
	if len(d.problems) > 0 {
		return nil, &Error{d.problems}
	}
	return f, nil
}

// noPolicy is the message for a file that defines no policy.
const noPolicy = "the file defines no policy; it needs at least one (a file without policies would take every operation's budget and breaker away)"

// keyLine returns the line of key in the mapping n, or 0.
func keyLine(n *yaml.Node, key string) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return 0
}

func policyNames(f *File) []string {
	out := make([]string, 0, len(f.Policies))
	for n := range f.Policies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var policyFields = []string{"max_attempts", "max_elapsed", "attempt_timeout", "min_attempt_time",
	"max_retry_after", "backoff", "retry_on", "budget", "breaker", "nested", "limiter", "preset", "hedge"}

func (d *decoder) policy(name string, n *yaml.Node, path string) *PolicySpec {
	p := &PolicySpec{Name: name, MaxAttempts: retry.DefaultMaxAttempts, Backoff: BackoffSpec{Strategy: "full_jitter"}}
	d.fields(n, path, policyFields, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "max_attempts":
			p.MaxAttempts = d.maxAttempts(v, fp)
		case "max_elapsed":
			p.MaxElapsed = d.duration(v, fp)
		case "attempt_timeout":
			p.AttemptTimeout = d.duration(v, fp)
		case "min_attempt_time":
			p.MinAttemptTime = d.duration(v, fp)
		case "max_retry_after":
			p.MaxRetryAfter = d.maxRetryAfter(v, fp)
		case "backoff":
			p.Backoff = d.backoff(v, fp)
		case "retry_on":
			p.RetryOn = d.retryOn(v, fp)
		case "budget":
			p.Budget = d.budget(v, fp)
		case "breaker":
			p.Breaker = d.breaker(v, fp)
		case "nested":
			p.Nested = d.nested(v, fp)
		case "limiter":
			p.Limiter = d.limiter(v, fp)
		case "preset":
			p.Preset = d.preset(v, fp)
		case "hedge":
			p.Hedge = d.hedge(v, fp)
		}
	})
	if p.Preset != "" && n.Kind == yaml.MappingNode {
		// Explicit fields override the preset.
		attempts, _ := presetRules(p.Preset)
		if valueOf(n, "max_attempts") == nil {
			p.MaxAttempts = attempts
		}
		if valueOf(n, "budget") == nil {
			p.Budget = &BudgetSpec{Kind: "ratio", Ratio: presetBudget(p.Preset)}
		}
		if valueOf(n, "backoff") == nil {
			p.Backoff = BackoffSpec{}
		}
	}
	d.checkHedge(p, n, path)
	d.checkKeys(p, n, path)
	return p
}

// maxAttempts reads max_attempts: a count from 1 to 1000, or "unlimited"
// (retry.Unlimited). 0 is refused: it used to mean no limit, and now
// would mean the default; the file must say which.
func (d *decoder) maxAttempts(n *yaml.Node, path string) int {
	s, ok := d.scalar(n, path)
	if !ok {
		return retry.DefaultMaxAttempts
	}
	if s == "unlimited" {
		return retry.Unlimited
	}
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		d.fail(n, path, "%q is not a whole number or unlimited", s)
	case v == 0:
		d.fail(n, path, "0 is not a limit: leave max_attempts out for the default (%d attempts), or write unlimited for no count limit", retry.DefaultMaxAttempts)
	case v < 1 || v > 1000:
		d.fail(n, path, "%d is outside [1, 1000] (or write unlimited for no count limit)", v)
	default:
		return v
	}
	return retry.DefaultMaxAttempts
}

// maxRetryAfter reads max_retry_after: a duration (0: the default cap,
// retry.DefaultMaxRetryAfter), or ignore (-1, retry.Policy's negative
// MaxRetryAfter: server advice is ignored).
func (d *decoder) maxRetryAfter(n *yaml.Node, path string) time.Duration {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		switch s := n.Value; {
		case s == "ignore":
			return -1
		case s == "none":
			d.fail(n, path, "none could mean no cap or no advice: write ignore to ignore server advice, or give the cap as a duration (left out: %v)", retry.DefaultMaxRetryAfter)
			return 0
		case strings.HasPrefix(s, "-"):
			d.fail(n, path, "%q must not be negative (write ignore to ignore server advice)", s)
			return 0
		}
	}
	return d.duration(n, path)
}

func (d *decoder) backoff(n *yaml.Node, path string) BackoffSpec {
	b := BackoffSpec{Strategy: "full_jitter"}
	var baseNode, maxNode, strategyNode *yaml.Node
	strategyOK := true
	d.fields(n, path, []string{"strategy", "base", "max", "step", "multiplier", "jitter", "factor"}, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "strategy":
			strategyNode = v
			b.Strategy, strategyOK = d.scalar(v, fp)
		case "base":
			baseNode = v
			b.Params.Base = d.duration(v, fp)
		case "max":
			maxNode = v
			b.Params.Max = d.positive(v, fp, backoff.DefaultMax)
		case "step":
			b.Params.Step = d.positiveSaid(v, fp, "base")
		case "multiplier":
			b.Params.Multiplier = d.number(v, fp, 1, 1000, false)
		case "factor":
			b.Params.Factor = d.number(v, fp, 0, 1, true)
		case "jitter":
			if s, ok := d.scalar(v, fp); ok {
				j, known := backoff.ParseJitter(s)
				if !known {
					d.fail(v, fp, "%q is not one of none, full, equal, decorrelated, proportional", s)
				}
				b.Params.Jitter = j
			}
		}
	})
	if !strategyOK {
		return b // reported by scalar
	}
	if b.Strategy == "constant" && baseNode == nil {
		// backoff.Constant has no default wait: a base left out would
		// retry at once, every client of a fleet in step. Like the other
		// strategies, a constant backoff without base waits DefaultBase;
		// only an explicit base: 0 asks for no wait.
		b.Params.Base = backoff.DefaultBase
	}
	if _, ok := backoff.Lookup(b.Strategy); !ok {
		d.fail(strategyNode, join(path, "strategy"), "%q is not a registered strategy (known: %s)", b.Strategy, strings.Join(backoff.Names(), ", "))
		return b
	}
	if b.Params.Max > 0 && b.Params.Base > b.Params.Max {
		left := ""
		if baseNode == nil {
			left = " (base left out: the default)"
		}
		d.fail(maxNode, join(path, "max"), "%v is below base %v%s", b.Params.Max, b.Params.Base, left)
		return b
	}
	if _, err := backoff.New(b.Strategy, b.Params); err != nil {
		at := maxNode
		if at == nil {
			at = baseNode
		}
		d.fail(at, path, "%s", strings.TrimPrefix(err.Error(), "backoff: "))
	}
	return b
}

var grpcCodes = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// GRPCCodeNumber returns the numeric gRPC status code for a canonical name
// such as "UNAVAILABLE".
func GRPCCodeNumber(name string) (uint32, bool) {
	for i, c := range grpcCodes {
		if c == name {
			return uint32(i), true
		}
	}
	return 0, false
}

func (d *decoder) retryOn(n *yaml.Node, path string) RetryOn {
	var r RetryOn
	d.fields(n, path, []string{"http_status", "grpc_codes"}, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "http_status":
			d.list(v, fp, func(_ int, e *yaml.Node, ep string) {
				if c := d.integer(e, ep, 100, 599); c != 0 {
					r.HTTPStatus = append(r.HTTPStatus, c)
				}
			})
		case "grpc_codes":
			r.GRPCCodes = d.grpcCodes(v, fp)
		}
	})
	return r
}

// grpcCodes reads a list of gRPC status code names (UNAVAILABLE, or
// Unavailable as grpc-go spells them) into canonical names. An empty list
// gives an empty, non-nil slice.
func (d *decoder) grpcCodes(n *yaml.Node, path string) []string {
	out := []string{}
	d.list(n, path, func(_ int, e *yaml.Node, ep string) {
		s, ok := d.scalar(e, ep)
		if !ok {
			return
		}
		canon := strings.ToUpper(camelToSnake(s))
		if canon == "CANCELED" {
			canon = "CANCELLED"
		}
		if _, ok := GRPCCodeNumber(canon); !ok {
			d.fail(e, ep, "%q is not a gRPC status code (e.g. UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED)", s)
			return
		}
		out = append(out, canon)
	})
	return out
}

// camelToSnake turns "ResourceExhausted" into "Resource_Exhausted"; names
// already in upper snake case are unchanged.
func camelToSnake(s string) string {
	if strings.ContainsRune(s, '_') || strings.ToUpper(s) == s {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// syntaxProblem turns a YAML parser error ("yaml: line 3: ...") into a
// Problem with the line in its place.
func syntaxProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: file, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(num); err == nil {
				p.Line, p.Msg = line, tail
			}
		}
	}
	return p
}

// versionOf is the version of a file's content.
func versionOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
