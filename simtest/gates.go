package simtest

import (
	"fmt"
	"time"
)

// Gates are the limits a policy must keep in every storm. A zero
// MaxAmplification means DefaultMaxAmplification and a zero MaxRecovery
// DefaultMaxRecovery, so that a check with no gates at all still fails a
// policy that doubles the load or leaves the downstream down after a
// storm; NoAmplificationLimit and NoRecoveryLimit turn them off. A zero
// MinSuccess sets no limit (what share of calls can succeed depends on
// the storm: at 50% failures, half of them without retries).
//
// Each gate is judged on the trials' mean and its 95% interval (see
// Estimate): a result whose interval lies on the right side of the limit
// passes, one whose interval lies wholly on the wrong side fails, and one
// whose interval crosses the limit is borderline: it fails too, marked
// so, unless PassBorderline.
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
	// MinSuccess is the least share of calls that must succeed, in
	// [0, 1] (0.95 is 95%), judged twice: on the calls ending while the
	// trigger lasts (StormResult.SuccessStorm) and on those ending after
	// it (SuccessRecovery), not on the whole run, which the steady part
	// dilutes.
	MinSuccess float64 `json:"min_success,omitempty"`
	// PassBorderline lets a borderline result (its interval crosses the
	// limit) pass; it is still reported. Not per storm.
	PassBorderline bool `json:"pass_borderline,omitempty"`
	// Storms holds limits for single storms by name: a field set there
	// replaces the one above for that storm.
	Storms map[string]Gates `json:"storms,omitempty"`
}

// DefaultMaxRecovery is the recovery limit of a zero Gates.MaxRecovery.
const DefaultMaxRecovery = 10 * time.Second

// DefaultMaxAmplification is the limit of a zero Gates.MaxAmplification:
// callers that double their steady load in a storm turn a blip into an
// overload of their own. Five attempts without a budget (about 5× in the
// outage) and three attempts without jitter or a budget (about 3×) fail
// it; every policy with a retry budget in simtest/testdata keeps it.
const DefaultMaxAmplification = 2

// NoAmplificationLimit, as Gates.MaxAmplification, leaves the peak
// amplification ungated.
const NoAmplificationLimit = -1

// NoRecoveryLimit, as Gates.MaxRecovery, leaves recovery ungated.
const NoRecoveryLimit time.Duration = -1

// For returns the gates that apply to storm: g's, with the fields that
// g.Storms[storm] sets replacing them, and MaxRecovery resolved.
func (g Gates) For(storm string) Gates {
	out := Gates{MaxAmplification: g.MaxAmplification, MaxRecovery: g.MaxRecovery, MinSuccess: g.MinSuccess, PassBorderline: g.PassBorderline}
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
	// GateSuccess is judged on two windows: Failure.Window says which.
	GateSuccess = "min-success"
	// GateRunaway is failed by a storm run stopped for its work (see
	// StormResult.Runaway), whatever the gates.
	GateRunaway = "runaway"
)

// Windows of the success gate.
const (
	WindowStorm    = "storm"
	WindowRecovery = "recovery"
)

// Failure is one gate a policy failed in one storm.
type Failure struct {
	// Policy is the label of the policy that failed (Policy.Name).
	Policy string `json:"policy"`
	// Storm is the name of the storm it failed in (Storm.Name).
	Storm string `json:"storm"`
	// Gate is the gate failed: GateAmplification, GateRecovery,
	// GateSuccess or GateRunaway.
	Gate string `json:"gate"`
	// Window is, for GateSuccess, the calls judged: WindowStorm or
	// WindowRecovery.
	Window string `json:"window,omitempty"`
	// Limit is the gate's limit (seconds for max-recovery). Value is the
	// trials' mean and Low, High its 95% interval; they are null when
	// there is no value (a storm after which some trial did not recover,
	// a runaway).
	Limit float64  `json:"limit"`
	Value *float64 `json:"value"`
	Low   *float64 `json:"low"`
	High  *float64 `json:"high"`
	// Borderline says the interval crosses the limit: the result may be
	// on either side of it. It fails unless Gates.PassBorderline.
	Borderline bool `json:"borderline,omitempty"`
	// Message says it in a sentence, with the margin.
	Message string `json:"message"`
}

// Verdicts of one gate.
const (
	verdictPass = iota
	verdictBorderline
	verdictFail
)

// overMax judges an estimate against a maximum.
func overMax(e Estimate, limit float64) int {
	switch {
	case e.High <= limit:
		return verdictPass
	case e.Low > limit:
		return verdictFail
	}
	return verdictBorderline
}

// underMin judges an estimate against a minimum.
func underMin(e Estimate, limit float64) int {
	switch {
	case e.Low >= limit:
		return verdictPass
	case e.High < limit:
		return verdictFail
	}
	return verdictBorderline
}

func ptr(v float64) *float64 { return &v }

// judge returns the gates r fails, borderline ones included.
func judge(policy string, r *StormResult, g Gates) []Failure {
	var out []Failure
	n := len(r.Trials)
	fail := func(f Failure, format string, args ...any) {
		f.Policy, f.Storm = policy, r.Storm
		word := "failed"
		if f.Borderline {
			word = "is borderline in"
			if g.PassBorderline {
				word = "is borderline (passed) in"
			}
		}
		f.Message = fmt.Sprintf("%s %s %s: ", policy, word, r.Storm) + fmt.Sprintf(format, args...)
		out = append(out, f)
	}
	interval := func(e Estimate, unit func(float64) string) string {
		return fmt.Sprintf("mean of %d trials %s, 95%% interval %s–%s", n, unit(e.Mean), unit(e.Low), unit(e.High))
	}
	times := func(x float64) string { return fmt.Sprintf("%.2f×", x) }
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	if r.Runaway != "" {
		fail(Failure{Gate: GateRunaway, Limit: RunawayFactor},
			"its retries ran away: the simulation stopped after more than %d times the work of steady traffic, "+
				"so every gate fails (give the policy a backoff, an attempt limit or a budget)", RunawayFactor)
		return out
	}
	withEst := func(f Failure, e Estimate, v int) Failure {
		f.Value, f.Low, f.High, f.Borderline = ptr(e.Mean), ptr(e.Low), ptr(e.High), v == verdictBorderline
		return f
	}
	if L := g.MaxAmplification; L > 0 {
		e := r.PeakAmplification
		switch v := overMax(e, L); v {
		case verdictFail:
			over := e.Mean - L
			fail(withEst(Failure{Gate: GateAmplification, Limit: L}, e, v),
				"peak amplification %.2f× is above the limit %.2f× by %.2f× (+%.0f%%; %s)",
				e.Mean, L, over, 100*over/L, interval(e, times))
		case verdictBorderline:
			fail(withEst(Failure{Gate: GateAmplification, Limit: L}, e, v),
				"peak amplification %.2f×: its 95%% interval %.2f×–%.2f× over %d trials crosses the limit %.2f×",
				e.Mean, e.Low, e.High, n, L)
		}
	}
	if g.MaxRecovery > 0 {
		limit := g.MaxRecovery.Seconds()
		secs := func(x float64) string { return fmtSeconds(x) }
		switch {
		case r.RecoveredTrials == 0:
			fail(Failure{Gate: GateRecovery, Limit: limit},
				"no recovery in the %s observed after the trigger ended, in any of %d trials (limit %s)",
				fmtSeconds(r.observed), n, g.MaxRecovery)
		case !r.Recovered:
			fail(Failure{Gate: GateRecovery, Limit: limit, Borderline: true},
				"%d of %d trials did not recover in the %s observed after the trigger ended (limit %s)",
				n-r.RecoveredTrials, n, fmtSeconds(r.observed), g.MaxRecovery)
		default:
			e := *r.RecoveryS
			switch v := overMax(e, limit); v {
			case verdictFail:
				fail(withEst(Failure{Gate: GateRecovery, Limit: limit}, e, v),
					"recovery took %s after the trigger ended, %s over the limit %s (%s)",
					fmtSeconds(e.Mean), fmtSeconds(e.Mean-limit), g.MaxRecovery, interval(e, secs))
			case verdictBorderline:
				fail(withEst(Failure{Gate: GateRecovery, Limit: limit}, e, v),
					"recovery took %s after the trigger ended: its 95%% interval %s–%s over %d trials crosses the limit %s",
					fmtSeconds(e.Mean), fmtSeconds(e.Low), fmtSeconds(e.High), n, g.MaxRecovery)
			}
		}
	}
	if L := g.MinSuccess; L > 0 {
		for _, w := range []struct {
			name, what string
			e          Estimate
		}{{WindowStorm, "while the trigger lasts", r.SuccessStorm}, {WindowRecovery, "after the trigger ended", r.SuccessRecovery}} {
			switch v := underMin(w.e, L); v {
			case verdictFail:
				fail(withEst(Failure{Gate: GateSuccess, Window: w.name, Limit: L}, w.e, v),
					"success %s %.1f%% is below the minimum %.1f%% by %.1f points (%s)",
					w.what, 100*w.e.Mean, 100*L, 100*(L-w.e.Mean), interval(w.e, pct))
			case verdictBorderline:
				fail(withEst(Failure{Gate: GateSuccess, Window: w.name, Limit: L}, w.e, v),
					"success %s %.1f%%: its 95%% interval %.1f%%–%.1f%% over %d trials crosses the minimum %.1f%%",
					w.what, 100*w.e.Mean, 100*w.e.Low, 100*w.e.High, n, 100*L)
			}
		}
	}
	return out
}

func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond).String()
}
