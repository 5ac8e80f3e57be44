package simtest

import (
	"fmt"
	"time"
)

// Gates are the limits a policy must keep in every storm. A zero
// MaxAmplification means DefaultMaxAmplification and a zero MaxRecovery
// DefaultMaxRecovery, so that a check with no gates at all still fails a
// policy that multiplies the load tenfold or leaves the downstream down
// after a storm; NoAmplificationLimit and NoRecoveryLimit turn them off.
// A zero MinSuccess sets no limit (what share of calls can succeed
// depends on the storm: at 50% failures, half of them without retries).
type Gates struct {
	// MaxAmplification bounds the peak amplification: the highest offered
	// load over any 1s window, divided by the baseline load. At least 1.
	// 0: DefaultMaxAmplification; NoAmplificationLimit: not gated.
	MaxAmplification float64 `json:"max_amplification,omitempty"`
	// MaxRecovery bounds the time from the end of the trigger until the
	// downstream has recovered (sim.Metrics.RecoveryS); a storm after which
	// it does not recover fails. 0: DefaultMaxRecovery; NoRecoveryLimit:
	// not gated.
	MaxRecovery time.Duration `json:"-"`
	// MinSuccess is the least share of the run's calls that must succeed,
	// in [0, 1] (0.95 is 95%).
	MinSuccess float64 `json:"min_success,omitempty"`
	// Storms holds limits for single storms by name: a field set there
	// replaces the one above for that storm.
	Storms map[string]Gates `json:"storms,omitempty"`
}

// DefaultMaxRecovery is the recovery limit of a zero Gates.MaxRecovery.
const DefaultMaxRecovery = 10 * time.Second

// DefaultMaxAmplification is the limit of a zero Gates.MaxAmplification:
// callers sending ten times their steady load are an outage of their own.
const DefaultMaxAmplification = 10

// NoAmplificationLimit, as Gates.MaxAmplification, leaves the peak
// amplification ungated.
const NoAmplificationLimit = -1

// NoRecoveryLimit, as Gates.MaxRecovery, leaves recovery ungated.
const NoRecoveryLimit time.Duration = -1

// For returns the gates that apply to storm: g's, with the fields that
// g.Storms[storm] sets replacing them, and MaxRecovery resolved.
func (g Gates) For(storm string) Gates {
	out := Gates{MaxAmplification: g.MaxAmplification, MaxRecovery: g.MaxRecovery, MinSuccess: g.MinSuccess}
	if s, ok := g.Storms[storm]; ok {
		if s.MaxAmplification != 0 {
			out.MaxAmplification = s.MaxAmplification
		}
		if s.MaxRecovery != 0 {
			out.MaxRecovery = s.MaxRecovery
		}
		if s.MinSuccess != 0 {
			out.MinSuccess = s.MinSuccess
		}
	}
	if out.MaxRecovery == 0 {
		out.MaxRecovery = DefaultMaxRecovery
	}
	if out.MaxAmplification == 0 {
		out.MaxAmplification = DefaultMaxAmplification
	}
	return out
}

// validate reports the first gate out of range.
func (g Gates) validate() error {
	check := func(where string, g Gates) error {
		if a := g.MaxAmplification; !finite(a) || (a != 0 && a != NoAmplificationLimit && a < 1) {
			return fmt.Errorf("%smax amplification %g must be at least 1 (the baseline itself), or NoAmplificationLimit", where, g.MaxAmplification)
		}
		if !finite(g.MinSuccess) || g.MinSuccess < 0 || g.MinSuccess > 1 {
			return fmt.Errorf("%smin success %g must be a share in [0, 1] (0.95 is 95%%)", where, g.MinSuccess)
		}
		if g.MaxRecovery < NoRecoveryLimit {
			return fmt.Errorf("%smax recovery %s must not be negative", where, g.MaxRecovery)
		}
		return nil
	}
	if err := check("", g); err != nil {
		return err
	}
	for _, name := range sortedKeys(g.Storms) {
		if _, err := pickStorms([]string{name}); err != nil {
			return fmt.Errorf("gates for storm %q: %w", name, err)
		}
		if len(g.Storms[name].Storms) > 0 {
			return fmt.Errorf("gates for storm %q: storms do not nest", name)
		}
		if err := check("storm "+name+": ", g.Storms[name]); err != nil {
			return err
		}
	}
	return nil
}

// Gate names, as failures report them (the command-line flags).
const (
	GateAmplification = "max-amplification"
	GateRecovery      = "max-recovery"
	GateSuccess       = "min-success"
	// GateRunaway is failed by a storm run stopped for its work (see
	// StormResult.Runaway), whatever the gates.
	GateRunaway = "runaway"
)

// Failure is one gate a policy failed in one storm.
type Failure struct {
	Policy string `json:"policy"`
	Storm  string `json:"storm"`
	Gate   string `json:"gate"`
	// Limit and Value are the gate's limit and what the run measured
	// (seconds for max-recovery; Value is -1 when the downstream did not
	// recover).
	Limit float64 `json:"limit"`
	Value float64 `json:"value"`
	// Message says it in a sentence, with the margin.
	Message string `json:"message"`
}

// judge returns the gates r fails.
func judge(policy string, r *StormResult, g Gates) []Failure {
	var out []Failure
	fail := func(gate string, limit, value float64, format string, args ...any) {
		out = append(out, Failure{Policy: policy, Storm: r.Storm, Gate: gate, Limit: limit, Value: value,
			Message: fmt.Sprintf("%s failed %s: ", policy, r.Storm) + fmt.Sprintf(format, args...)})
	}
	if r.Runaway != "" {
		fail(GateRunaway, RunawayFactor, 0,
			"its retries ran away: the simulation stopped after more than %d times the work of steady traffic, "+
				"so every gate fails (give the policy a backoff, an attempt limit or a budget)", RunawayFactor)
		return out
	}
	if g.MaxAmplification > 0 && r.PeakAmplification > g.MaxAmplification {
		over := r.PeakAmplification - g.MaxAmplification
		fail(GateAmplification, g.MaxAmplification, r.PeakAmplification,
			"peak amplification %.2f× is above the limit %.2f× by %.2f× (+%.0f%%)",
			r.PeakAmplification, g.MaxAmplification, over, 100*over/g.MaxAmplification)
	}
	if g.MaxRecovery > 0 {
		limit := g.MaxRecovery.Seconds()
		switch {
		case !r.Recovered:
			fail(GateRecovery, limit, -1,
				"no recovery in the %s observed after the trigger ended (limit %s)",
				fmtSeconds(r.observed), g.MaxRecovery)
		case r.RecoveryS > limit:
			fail(GateRecovery, limit, r.RecoveryS,
				"recovery took %s after the trigger ended, %s over the limit %s",
				fmtSeconds(r.RecoveryS), fmtSeconds(r.RecoveryS-limit), g.MaxRecovery)
		}
	}
	if g.MinSuccess > 0 && r.SuccessRate < g.MinSuccess {
		fail(GateSuccess, g.MinSuccess, r.SuccessRate,
			"success rate %.1f%% is below the minimum %.1f%% by %.1f points",
			100*r.SuccessRate, 100*g.MinSuccess, 100*(g.MinSuccess-r.SuccessRate))
	}
	return out
}

func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond).String()
}
