package simtest

import (
	"fmt"
	"math"
)

// weakest finds the storm that hurt the policy most and says why, in one
// sentence naming the mechanism the policy lacks where that is the cause.
//
// The order of concern: a storm it does not recover from, then a failed
// gate, then the storm with the highest peak amplification.
func weakest(f features, storms []Storm, rs []StormResult) string {
	title := func(name string) string {
		for _, s := range storms {
			if s.Name == name {
				return s.Title
			}
		}
		return name
	}
	attempts := func() string {
		if f.attempts < 0 {
			return "attempts without a count limit"
		}
		return fmt.Sprintf("%d attempts", f.attempts)
	}
	// 0. A runaway.
	for _, r := range rs {
		if r.Runaway != "" {
			return fmt.Sprintf("runaway retries: in the %s its retries multiply without bound (%s and %s) until the simulation stops them",
				title(r.Storm), attempts(), map[bool]string{true: "no wait between them", false: "no budget to cap them"}[f.noBackoff])
		}
	}
	// 1. No recovery.
	for _, r := range rs {
		if r.Recovered {
			continue
		}
		switch {
		case f.breaker && r.AfterAttemptsPerCall < 0.97:
			return fmt.Sprintf("the breaker: after the %s, open breakers keep failing calls fast while the downstream could serve them "+
				"(at least %.0f%% of later calls never reach it); a shorter open_timeout lets them probe sooner",
				title(r.Storm), 100*(1-r.AfterAttemptsPerCall))
		case !f.budget && !f.breaker:
			return fmt.Sprintf("no budget or breaker: after the %s, retries keep the downstream overloaded (load ×%.1f) and it does not recover", title(r.Storm), r.PeakAmplification)
		case !f.budget:
			return fmt.Sprintf("no budget: after the %s, retries keep the downstream overloaded (load ×%.1f) and it does not recover", title(r.Storm), r.PeakAmplification)
		default:
			return fmt.Sprintf("after the %s the downstream does not recover: even within the budget, load stays at ×%.1f the baseline", title(r.Storm), r.PeakAmplification)
		}
	}
	// 2. The worst failed gate, else the highest peak.
	worst, score := -1, math.Inf(-1)
	for i, r := range rs {
		for _, fl := range r.Failures {
			s := 1.0
			switch fl.Gate {
			case GateAmplification:
				s = fl.Value / fl.Limit
			case GateRecovery:
				s = fl.Value / fl.Limit
			case GateSuccess:
				s = fl.Limit / math.Max(fl.Value, 0.01)
			}
			if s+10 > score {
				worst, score = i, s+10
			}
		}
	}
	if worst < 0 {
		// Every gate kept: the storm its callers feel most, the lowest
		// success rate (ties: the higher peak).
		best := math.Inf(1)
		for i, r := range rs {
			if r.SuccessRate < best || (r.SuccessRate == best && r.PeakAmplification > rs[worst].PeakAmplification) {
				worst, best = i, r.SuccessRate
			}
		}
		if worst >= 0 {
			r := rs[worst]
			if f.attempts != 1 && !f.budget && (r.Storm == StormErrors50 || r.Storm == StormErrors10) {
				return fmt.Sprintf("no budget: at %s every failed call retries up to %s (%.2f attempts per call, load ×%.1f)",
					title(r.Storm), attempts(), r.StormAttemptsPerCall, r.PeakAmplification)
			}
			return fmt.Sprintf("the %s: %.1f%% of calls succeed, p99 %s, load peaks at ×%.2f the baseline",
				title(r.Storm), 100*r.SuccessRate, fmtMS(r.P99ms), r.PeakAmplification)
		}
	}
	if worst < 0 {
		return "no storm was run"
	}
	r := rs[worst]
	lowSuccess := false
	for _, fl := range r.Failures {
		if fl.Gate == GateSuccess {
			lowSuccess = true
		}
	}
	switch {
	case lowSuccess && f.attempts == 1:
		return fmt.Sprintf("no retries: in the %s only %.0f%% of calls succeed", title(r.Storm), 100*r.SuccessRate)
	case lowSuccess && f.budget:
		return fmt.Sprintf("the budget spends its retries early: in the %s only %.0f%% of calls succeed", title(r.Storm), 100*r.SuccessRate)
	case lowSuccess && f.breaker:
		return fmt.Sprintf("the breaker fails calls fast: in the %s only %.0f%% of calls succeed", title(r.Storm), 100*r.SuccessRate)
	case lowSuccess:
		return fmt.Sprintf("%s are not enough: in the %s only %.0f%% of calls succeed", attempts(), title(r.Storm), 100*r.SuccessRate)
	case !f.budget && (r.Storm == StormErrors50 || r.Storm == StormErrors10) && f.attempts != 1:
		return fmt.Sprintf("no budget: at %s every failed call retries up to %s (%.2f attempts per call, load ×%.1f)",
			title(r.Storm), attempts(), r.StormAttemptsPerCall, r.PeakAmplification)
	case f.noJitter && f.attempts != 1 && r.Storm == StormOutage:
		return fmt.Sprintf("no jitter: after the %s the retries arrive in lockstep (peak ×%.1f the baseline)", title(r.Storm), r.PeakAmplification)
	case !f.budget && f.attempts != 1:
		return fmt.Sprintf("no budget: in the %s retries raise the load to ×%.1f the baseline (%.2f attempts per call)", title(r.Storm), r.PeakAmplification, r.StormAttemptsPerCall)
	case f.attempts == 1:
		return fmt.Sprintf("no retries: the %s reaches callers unmasked (%.0f%% of calls succeed)", title(r.Storm), 100*r.SuccessRate)
	default:
		return fmt.Sprintf("the %s: load peaks at ×%.2f the baseline, %.0f%% of calls succeed, recovery in %s",
			title(r.Storm), r.PeakAmplification, 100*r.SuccessRate, fmtSeconds(r.RecoveryS))
	}
}
