package simtest

import (
	"fmt"
	"math"
)

// weakest finds the storm that hurt the policy most and says why, in one
// sentence derived from that storm's measured figures: the mechanism it
// names is one the figures show (open breakers failing calls fast, the
// limiter refusing, hedges adding load, retries multiplying attempts),
// and the figures it quotes are the measured ones.
//
// The order of concern: a runaway, then the worst failed gate (a storm
// without recovery first), then the storm with the lowest success while
// the trigger lasts.
func weakest(f features, storms []Storm, rs []StormResult) string {
	title := func(name string) string {
		for _, s := range storms {
			if s.Name == name {
				return s.Title
			}
		}
		return name
	}
	for _, r := range rs {
		if r.Runaway != "" {
			return fmt.Sprintf("runaway retries: in the %s its retries multiply without bound (%s) until the simulation stops them",
				title(r.Storm), map[bool]string{true: "no wait between them", false: "no budget to cap them"}[f.noBackoff])
		}
	}
	if len(rs) == 0 {
		return "no storm was run"
	}
	worst, score := -1, math.Inf(-1)
	for i, r := range rs {
		for _, fl := range r.Failures {
			s := 1.0
			if fl.Value != nil {
				switch fl.Gate {
				case GateAmplification, GateRecovery:
					s = *fl.Value / fl.Limit
				case GateSuccess:
					s = fl.Limit / math.Max(*fl.Value, 0.01)
				}
			} else {
				s = 100 // no recovery
			}
			if fl.Borderline {
				s -= 0.5
			}
			if s+10 > score {
				worst, score = i, s+10
			}
		}
	}
	if worst < 0 {
		best := math.Inf(1)
		for i, r := range rs {
			if v := r.SuccessStorm.Mean; v < best || (v == best && r.PeakAmplification.Mean > rs[worst].PeakAmplification.Mean) {
				worst, best = i, v
			}
		}
	}
	r := rs[worst]
	return fmt.Sprintf("the %s: %s%s", title(r.Storm), cause(f, r), figures(r))
}

// cause names the mechanism the figures of r show, with its figure.
func cause(f features, r StormResult) string {
	switch {
	case f.breaker && !r.Recovered && r.AfterAttemptsPerCall < 0.97:
		return fmt.Sprintf("after the trigger, open breakers failed at least %.0f%% of later calls without trying the downstream (a shorter open_timeout lets them probe sooner); ",
			100*(1-r.AfterAttemptsPerCall))
	case f.breaker && r.StormFastFailed >= 0.1:
		return fmt.Sprintf("open breakers failed at least %.0f%% of its calls without trying the downstream; ", 100*r.StormFastFailed)
	case f.limiter && r.LocalRejected >= 0.05:
		return fmt.Sprintf("the limiter refused %.0f%% of the attempts; ", 100*r.LocalRejected)
	case f.hedge && r.HedgeLoad >= 0.05:
		return fmt.Sprintf("hedges made %.0f%% of the offered load (%.2f per call); ", 100*r.HedgeLoad, r.Hedges)
	case r.StormAttemptsPerCall >= 1.5 && !f.budget:
		return "with no budget, retries multiply the attempts; "
	case r.StormAttemptsPerCall >= 1.5:
		return "even within the budget, retries multiply the attempts; "
	case f.noJitter && f.attempts != 1 && r.PeakAmplification.Mean >= 1.5*math.Max(r.MeanAmplification, 1):
		return "without jitter the retries arrive in lockstep; "
	case f.attempts == 1:
		return "with no retries every failure reaches the caller; "
	case r.NotRetried > 0.01:
		return fmt.Sprintf("its retry_on leaves %.2f failed attempts per call unretried; ", r.NotRetried)
	}
	return ""
}

// figures quotes r's measured figures.
func figures(r StormResult) string {
	s := fmt.Sprintf("%.2f attempts per call, load peaks at ×%.2f the baseline, %.1f%% of calls succeed while it lasts",
		r.StormAttemptsPerCall, r.PeakAmplification.Mean, 100*r.SuccessStorm.Mean)
	switch {
	case r.RecoveredTrials == 0:
		s += ", and the downstream does not recover"
	case !r.Recovered:
		s += fmt.Sprintf(", and %d of %d trials do not recover", len(r.Trials)-r.RecoveredTrials, len(r.Trials))
	default:
		s += fmt.Sprintf(", recovery in %s", fmtSeconds(r.RecoveryS.Mean))
	}
	return s
}
