package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// Env is what a run hands a policy's Budget and Breaker constructors: the
// run's virtual clock and a seeded random source (for the breaker's open
// jitter). Both are for use inside the run's single goroutine.
type Env struct {
	// Clock is the run's virtual clock (time starts at sim.Epoch and
	// moves only as the run's events do); timers on it fire as events of
	// the run.
	Clock clock.Clock
	// Rand is the run's seeded source, one for every constructor call of
	// the run, not safe for concurrent use.
	Rand rand.Source
}

// Standard policy names, in the order tables list them.
const (
	PolicyNoRetry      = "no-retry"
	PolicyImmediate    = "immediate"
	PolicyFixed        = "fixed"
	PolicyExponential  = "exponential"
	PolicyEqual        = "equal"
	PolicyFull         = "full"
	PolicyDecorrelated = "decorrelated"
	PolicyBudget       = "full+budget"
	PolicyGuarded      = "full+budget+breaker"
)

// PolicyNames returns the standard policy names in table order.
func PolicyNames() []string {
	return []string{PolicyNoRetry, PolicyImmediate, PolicyFixed, PolicyExponential,
		PolicyEqual, PolicyFull, PolicyDecorrelated, PolicyBudget, PolicyGuarded}
}

var policyAliases = map[string]string{
	"none": PolicyNoRetry, "noretry": PolicyNoRetry, "no-retries": PolicyNoRetry,
	"immediate-retries": PolicyImmediate, "retry": PolicyImmediate,
	"constant": PolicyFixed, "fixed-interval": PolicyFixed,
	"exp": PolicyExponential, "no-jitter": PolicyExponential, "exponential-no-jitter": PolicyExponential,
	"equal-jitter": PolicyEqual, "full-jitter": PolicyFull,
	"decorrelated-jitter": PolicyDecorrelated, "decorr": PolicyDecorrelated,
	"budget": PolicyBudget, "full-jitter+budget": PolicyBudget,
	"breaker": PolicyGuarded, "full-jitter+budget+breaker": PolicyGuarded, "guarded": PolicyGuarded,
}

// CanonicalPolicy returns the standard name for name or one of its aliases
// ("full-jitter" for "full", ...), case-insensitively.
func CanonicalPolicy(name string) (string, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, p := range PolicyNames() {
		if n == p {
			return p, true
		}
	}
	p, ok := policyAliases[n]
	return p, ok
}

// ErrPolicy is wrapped by errors about policy names and lists.
var ErrPolicy = errors.New("sim: invalid policy")

// ParsePolicyList reads a comma-separated list of policy names. "all"
// stands for every standard policy. Names that are not standard are kept
// as written when known(name) reports true (a scenario's own policies);
// otherwise the list is rejected. Duplicates are dropped.
func ParsePolicyList(s string, known func(string) bool) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case strings.EqualFold(f, "all"):
			for _, p := range PolicyNames() {
				add(p)
			}
		default:
			if p, ok := CanonicalPolicy(f); ok {
				add(p)
			} else if known != nil && known(f) {
				add(f)
			} else {
				return nil, fmt.Errorf("%w: unknown policy %q (standard: %s)", ErrPolicy, f, strings.Join(PolicyNames(), ", "))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty policy list", ErrPolicy)
	}
	return out, nil
}

// PolicyParams are a scenario's settings for the standard policies. Zero
// fields take the defaults noted.
type PolicyParams struct {
	// MaxAttempts of the retrying policies, the first included. 0: 4
	// (three retries); -1: no count limit. The immediate policy makes at
	// most 4 attempts whatever this says.
	MaxAttempts int
	// Base and Max of the exponential family. 0: backoff's defaults
	// (100ms, 10s).
	Base, Max time.Duration
	// Interval of the fixed policy. 0: 1s.
	Interval time.Duration
	// AttemptTimeout, MaxElapsed: as in Policy.
	AttemptTimeout, MaxElapsed time.Duration
	// Budget is the ratio budget of the +budget policies. nil:
	// budget.TenPercent().
	Budget *budget.RatioConfig
	// Breaker is the breaker of full+budget+breaker (its Clock and Rand
	// are set by the run). nil: DefaultBreaker().
	Breaker *breaker.Config
}

// DefaultBreaker is the breaker used by full+budget+breaker unless a
// scenario sets its own: it opens when at least half of the calls of the
// last 10s (and at least 20 of them) failed, and probes after 5s.
func DefaultBreaker() breaker.Config {
	return breaker.Config{
		Window:      breaker.Window{Duration: 10 * time.Second, FailureRatio: 0.5, MinCalls: 20},
		OpenTimeout: 5 * time.Second,
	}
}

// StandardPolicy builds the standard policy called name (or an alias) with
// the scenario's parameters.
func StandardPolicy(name string, p PolicyParams) (Policy, error) {
	canon, ok := CanonicalPolicy(name)
	if !ok {
		return Policy{}, fmt.Errorf("%w: unknown policy %q", ErrPolicy, name)
	}
	attempts := p.MaxAttempts
	switch {
	case attempts == 0:
		attempts = 4
	case attempts < 0:
		attempts = 0
	}
	pol := Policy{Name: canon, MaxAttempts: attempts, AttemptTimeout: p.AttemptTimeout, MaxElapsed: p.MaxElapsed}
	exp := func(j backoff.Jitter) func(rand.Source) backoff.Strategy {
		return func(src rand.Source) backoff.Strategy {
			return backoff.Exponential{Base: p.Base, Max: p.Max, Jitter: j, Rand: src}
		}
	}
	switch canon {
	case PolicyNoRetry:
		pol.MaxAttempts = 1
	case PolicyImmediate:
		if pol.MaxAttempts == 0 || pol.MaxAttempts > 4 {
			pol.MaxAttempts = 4 // "immediate retries (3)": never an unbounded tight loop
		}
	case PolicyFixed:
		iv := p.Interval
		if iv == 0 {
			iv = time.Second
		}
		pol.Backoff = func(rand.Source) backoff.Strategy { return backoff.Constant{Interval: iv} }
	case PolicyExponential:
		pol.Backoff = exp(backoff.None)
	case PolicyEqual:
		pol.Backoff = exp(backoff.Equal)
	case PolicyFull:
		pol.Backoff = exp(backoff.Full)
	case PolicyDecorrelated:
		pol.Backoff = exp(backoff.Decorrelated)
	case PolicyBudget, PolicyGuarded:
		pol.Backoff = exp(backoff.Full)
		cfg := budget.TenPercent()
		if p.Budget != nil {
			cfg = *p.Budget
		}
		if err := cfg.Validate(); err != nil {
			return Policy{}, fmt.Errorf("%w: %s: %w", ErrPolicy, canon, err)
		}
		pol.Budget = RatioBudget(cfg)
		if canon == PolicyGuarded {
			bc := DefaultBreaker()
			if p.Breaker != nil {
				bc = *p.Breaker
			}
			if err := bc.Validate(); err != nil {
				return Policy{}, fmt.Errorf("%w: %s: %w", ErrPolicy, canon, err)
			}
			pol.Breaker = Breaker(bc)
		}
	}
	return pol, nil
}

// RatioBudget returns a Policy.Budget constructor for budget.NewRatio(c):
// one token bucket per caller.
func RatioBudget(c budget.RatioConfig) func(Env) retry.Budget {
	return func(Env) retry.Budget { return budget.NewRatio(c) }
}

// WindowBudget returns a Policy.Budget constructor for budget.NewWindow(c)
// on the run's virtual clock.
func WindowBudget(c budget.WindowConfig) func(Env) retry.Budget {
	return func(e Env) retry.Budget {
		c := c
		c.Clock = e.Clock
		return budget.NewWindow(c)
	}
}

// ConcurrencyBudget returns a Policy.Budget constructor for
// budget.NewConcurrency(c).
func ConcurrencyBudget(c budget.ConcurrencyConfig) func(Env) retry.Budget {
	return func(Env) retry.Budget { return budget.NewConcurrency(c) }
}

// Breaker returns a Policy.Breaker constructor for breaker.New(c) on the
// run's virtual clock and seeded random source.
func Breaker(c breaker.Config) func(Env) retry.Breaker {
	return func(e Env) retry.Breaker {
		c := c
		c.Clock = e.Clock
		c.Rand = e.Rand
		return breaker.New(c)
	}
}

// breakerRate is a breaker that opens when at least the share ratio of the calls
// ending in the last window (and at least minCalls of them) failed, and
// stays open for open.
func breakerRate(ratio float64, window time.Duration, minCalls int, open time.Duration) breaker.Config {
	return breaker.Config{
		Window:      breaker.Window{Duration: window, FailureRatio: ratio, MinCalls: minCalls},
		OpenTimeout: open,
	}
}
