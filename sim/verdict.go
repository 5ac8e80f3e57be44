package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/budget"
)

// CaseVerdict is what a verdict says of one case of a model scenario,
// in a form a test can hold against the table: which policies stayed
// stuck, which recovered (and the range of their recovery times), which
// recovered in only some trials, which could not be judged, which were
// not run, and the policies with the lowest and highest peak load, with
// the policies the trials cannot tell apart from each end. Verdict
// renders it.
type CaseVerdict struct {
	// Case is the case's name (Case.Name).
	Case string
	// Stuck are the policies that recovered in none of their trials,
	// which could all judge it; Recovered those that recovered in every
	// trial. Both in row order.
	Stuck, Recovered []string
	// Unobserved are the policies that recovered in no trial, some of
	// which ended too soon after the fault to call them stuck
	// (Metrics.Unobserved).
	Unobserved []string
	// RecoveryMin and RecoveryS are the fastest and slowest RecoveryS, in
	// seconds, of the Recovered policies (0 when there are none).
	RecoveryMin, RecoveryS float64
	// StuckSuccess is the lowest and highest SuccessRate of the Stuck
	// policies (zeros when there are none).
	StuckSuccess [2]float64
	// Partly are the policies that recovered in some of their trials
	// but not all.
	Partly []PartialRecovery
	// NotRun are the policies without a finished trial (a cancelled
	// run): they are judged on nothing.
	NotRun []string
	// Judged is the number of policies with figures.
	Judged int
	// LowPeak and HighPeak are the policies with the lowest and highest
	// mean peak×; LowTied and HighTied the other policies whose peak×
	// confidence interval overlaps theirs (not told apart from them by
	// the trials), a policy tied with both ends listed with the highest
	// only, neither end listed with the other.
	LowPeak, HighPeak string
	// LowPeakX and HighPeakX are their mean peak× (Metrics.Amplification).
	LowPeakX, HighPeakX float64
	LowTied, HighTied   []string
	// EndsTied is set when the lowest and highest peaks' intervals
	// overlap: the trials tell no two peaks of the case apart.
	EndsTied bool
	// NoiseFloor is the case's AmpNoiseFloor (0: none measured).
	NoiseFloor float64
	// Fault is set when the case has a fault window (FaultEndS after
	// FaultStartS); without one, String says nothing of recovery.
	Fault bool
	// LowSteady and HighSteady are the policies with the lowest and
	// highest SteadyLoad (the load before any fault against the
	// reference's), when the case has a reference.
	LowSteady, HighSteady string
	// LowSteadyX and HighSteadyX are their SteadyLoad.
	LowSteadyX, HighSteadyX float64
	// Tail is set when the verdict compares p99.9 (ModelSpec.TailVerdict):
	// LowTail and HighTail are the policies with the lowest and highest
	// (found whether Tail is set or not; String states them only with
	// it).
	Tail              bool
	LowTail, HighTail string
	// LowTailMS and HighTailMS are their p99.9 in milliseconds
	// (Metrics.P999ms).
	LowTailMS, HighTailMS float64
}

// PartialRecovery is a policy that recovered in Recovered of its Trials
// trials, in RecoveryS on average over those.
type PartialRecovery struct {
	// Policy is the policy's name.
	Policy string
	// Recovered is how many of its Trials finished trials recovered
	// (Metrics.Recovered × Trials, rounded, kept in [1, Trials]).
	Recovered, Trials int
	// RecoveryS is the mean recovery time, in seconds, of the trials that
	// recovered (Metrics.RecoveryS).
	RecoveryS float64
}

// overlaps reports whether the confidence intervals of two rows' peak×
// overlap: the trials do not tell the peaks apart (the ≈ of the tables).
func overlaps(a, b *Metrics) bool {
	lo, hi := a, b
	if lo.Amplification > hi.Amplification {
		lo, hi = hi, lo
	}
	return hi.Amplification-hi.AmplificationCI <= lo.Amplification+lo.AmplificationCI
}

// JudgeCase computes the verdict of a case whose rows carry Metrics. A
// policy counts as stuck when no trial recovered and the trials could
// judge recovery, as recovered when every trial did (RecoveryS then
// ranges over them), as partly recovered when some trials did, and as
// unobserved when no trial recovered and the run left too short a window
// after the fault to call it stuck (Metrics.Unobserved). A row without
// Metrics, or marked NotRun, is not run.
func JudgeCase(c *Case) CaseVerdict {
	v := CaseVerdict{Case: c.Name, NoiseFloor: c.AmpNoiseFloor, Fault: c.FaultEndS > c.FaultStartS, Tail: c.tail}
	var low, high, lowS, highS, lowT, highT *Metrics
	for _, r := range c.Rows {
		m := r.Metrics
		if m == nil || r.NotRun {
			v.NotRun = append(v.NotRun, r.Policy)
			continue
		}
		v.Judged++
		switch {
		case m.Recovered == 0 && m.Unobserved > 0:
			v.Unobserved = append(v.Unobserved, r.Policy)
		case m.Recovered == 0:
			if len(v.Stuck) == 0 {
				v.StuckSuccess = [2]float64{m.SuccessRate, m.SuccessRate}
			}
			v.StuckSuccess[0], v.StuckSuccess[1] = min(v.StuckSuccess[0], m.SuccessRate), max(v.StuckSuccess[1], m.SuccessRate)
			v.Stuck = append(v.Stuck, r.Policy)
		case m.Recovered >= 1:
			if len(v.Recovered) == 0 {
				v.RecoveryMin, v.RecoveryS = m.RecoveryS, m.RecoveryS
			}
			v.RecoveryMin, v.RecoveryS = min(v.RecoveryMin, m.RecoveryS), max(v.RecoveryS, m.RecoveryS)
			v.Recovered = append(v.Recovered, r.Policy)
		default:
			n := max(m.Trials, 1)
			k := min(max(int(math.Round(m.Recovered*float64(n))), 1), n)
			v.Partly = append(v.Partly, PartialRecovery{Policy: r.Policy, Recovered: k, Trials: n, RecoveryS: m.RecoveryS})
		}
		if low == nil || m.Amplification < low.Amplification {
			v.LowPeak, v.LowPeakX, low = r.Policy, m.Amplification, m
		}
		if high == nil || m.Amplification > high.Amplification {
			v.HighPeak, v.HighPeakX, high = r.Policy, m.Amplification, m
		}
		if m.SteadyLoad > 0 {
			if lowS == nil || m.SteadyLoad < lowS.SteadyLoad {
				v.LowSteady, v.LowSteadyX, lowS = r.Policy, m.SteadyLoad, m
			}
			if highS == nil || m.SteadyLoad > highS.SteadyLoad {
				v.HighSteady, v.HighSteadyX, highS = r.Policy, m.SteadyLoad, m
			}
		}
		if lowT == nil || m.P999ms < lowT.P999ms {
			v.LowTail, v.LowTailMS, lowT = r.Policy, m.P999ms, m
		}
		if highT == nil || m.P999ms > highT.P999ms {
			v.HighTail, v.HighTailMS, highT = r.Policy, m.P999ms, m
		}
	}
	if low == nil || low == high {
		return v
	}
	v.EndsTied = overlaps(low, high)
	if v.EndsTied {
		return v
	}
	for _, r := range c.Rows {
		m := r.Metrics
		if m == nil || r.NotRun || m == low || m == high {
			continue
		}
		switch {
		case overlaps(m, high):
			v.HighTied = append(v.HighTied, r.Policy)
		case overlaps(m, low):
			v.LowTied = append(v.LowTied, r.Policy)
		}
	}
	return v
}

// String renders the verdict as a few sentences.
func (v CaseVerdict) String() string {
	var b strings.Builder
	if v.Case != "" {
		b.WriteString(v.Case + ": ")
	}
	var parts []string
	all := len(v.NotRun) == 0 && len(v.Partly) == 0 && len(v.Unobserved) == 0
	if v.Fault {
		switch {
		case len(v.Stuck) > 0 && len(v.Recovered) == 0 && all:
			parts = append(parts, fmt.Sprintf("every policy stays stuck after the fault (%s success)", shareRange(v.StuckSuccess)))
		case len(v.Stuck) > 0:
			parts = append(parts, fmt.Sprintf("%s %s stuck after the fault (%s success)", list(v.Stuck), verb(v.Stuck, "stays", "stay"), shareRange(v.StuckSuccess)))
		}
		switch {
		case len(v.Recovered) > 0 && len(v.Stuck) == 0 && all:
			parts = append(parts, "every policy recovers, "+secRange(v.RecoveryMin, v.RecoveryS)+" after the fault ends")
		case len(v.Recovered) > 0:
			parts = append(parts, fmt.Sprintf("%s %s, %s after the fault ends", list(v.Recovered), verb(v.Recovered, "recovers", "recover"), secRange(v.RecoveryMin, v.RecoveryS)))
		}
		for _, p := range v.Partly {
			parts = append(parts, fmt.Sprintf("%s recovers in only %d of %d trials (in %.1fs after the fault ends in those)", p.Policy, p.Recovered, p.Trials, p.RecoveryS))
		}
		if len(v.Unobserved) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s not recovered when the traffic stops, too soon after the fault to call %s stuck (unobserved)",
				list(v.Unobserved), verb(v.Unobserved, "has", "have"), verb(v.Unobserved, "it", "them")))
		}
	}
	if len(v.NotRun) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s not run (the run was cancelled first)", list(v.NotRun), verb(v.NotRun, "was", "were")))
	}
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, "; ") + ". ")
	}
	if v.HighPeak != "" {
		lo, hi := fmt.Sprintf("%.1fx", v.LowPeakX), fmt.Sprintf("%.1fx", v.HighPeakX)
		switch {
		case v.Judged == 1:
			fmt.Fprintf(&b, "Peak load is %s (%s)", hi, v.HighPeak)
		case v.HighPeak == v.LowPeak || lo == hi:
			fmt.Fprintf(&b, "Peak load is %s for every policy", hi)
		case v.EndsTied:
			fmt.Fprintf(&b, "Peak load runs from %s (%s) to %s (%s), which the trials do not tell apart", lo, v.LowPeak, hi, v.HighPeak)
		default:
			fmt.Fprintf(&b, "Peak load runs from %s (%s) to %s (%s)", lo, tiedGroup(v.LowPeak, v.LowTied), hi, tiedGroup(v.HighPeak, v.HighTied))
		}
		switch {
		case v.NoiseFloor <= 0:
		case v.HighPeakX <= v.NoiseFloor:
			fmt.Fprintf(&b, ", all within the %.2fx noise floor", v.NoiseFloor)
		case v.Judged > 1 && v.HighPeakX-v.LowPeakX < v.NoiseFloor-1:
			fmt.Fprintf(&b, "; the policies differ by less than the %.2fx noise floor", v.NoiseFloor)
		default:
			fmt.Fprintf(&b, "; the no-fault noise floor is %.2fx", v.NoiseFloor)
		}
		b.WriteString(".")
	}
	if v.HighSteady != "" && v.HighSteady != v.LowSteady && v.HighSteadyX >= 1+SteadyMargin {
		fmt.Fprintf(&b, " Before any fault, steady load runs from %.2fx (%s) to %.2fx (%s) of the same workload without retries.",
			v.LowSteadyX, v.LowSteady, v.HighSteadyX, v.HighSteady)
	}
	if v.Tail && v.HighTail != "" && v.HighTail != v.LowTail && FormatMS(v.LowTailMS) != FormatMS(v.HighTailMS) {
		fmt.Fprintf(&b, " p99.9 runs from %s (%s) to %s (%s).", FormatMS(v.LowTailMS), v.LowTail, FormatMS(v.HighTailMS), v.HighTail)
	}
	return strings.TrimSpace(b.String())
}

// SteadyMargin is how far above 1 the highest SteadyLoad of a case must
// be for its verdict to state the steady load: below it, what the
// policies add before any fault is not worth a sentence.
const SteadyMargin = 0.05

// tiedGroup names a peak's policy and those not told apart from it.
func tiedGroup(p string, tied []string) string {
	if len(tied) == 0 {
		return p
	}
	return p + ", not told apart from " + list(tied)
}

func verb(names []string, one, many string) string {
	if len(names) == 1 {
		return one
	}
	return many
}

// list joins names as "a", "a and b", "a, b and c".
func list(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func shareRange(r [2]float64) string {
	if FormatShare(r[0]) == FormatShare(r[1]) {
		return FormatShare(r[0])
	}
	return FormatShare(r[0]) + " to " + FormatShare(r[1])
}

func secRange(a, b float64) string {
	if fmt.Sprintf("%.1f", a) == fmt.Sprintf("%.1f", b) {
		return fmt.Sprintf("in %.1fs", a)
	}
	return fmt.Sprintf("in %.1fs to %.1fs", a, b)
}

// sweepVerdict sums up a sweep: at its last (most stressed) case, the
// range of attempts per call and what each end achieved.
func sweepVerdict(rep *Report, first, n int) string {
	last := rep.Cases[first+n-1]
	var rows []Row
	for _, r := range last.Rows {
		if !r.NotRun && r.Metrics != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Sprintf("At %s, no policy was run (the run was cancelled first).", last.Name)
	}
	slices.SortStableFunc(rows, func(a, b Row) int { return cmp.Compare(a.Metrics.AttemptsPerCall, b.Metrics.AttemptsPerCall) })
	lo, hi := rows[0], rows[len(rows)-1]
	if len(rows) == 1 {
		return fmt.Sprintf("At %s, %s makes %.2f attempts per call (%s success).", last.Name, lo.Policy, lo.Metrics.AttemptsPerCall, FormatShare(lo.Metrics.SuccessRate))
	}
	return fmt.Sprintf("At %s, attempts per call run from %.2f (%s, %s success) to %.2f (%s, %s success).",
		last.Name, lo.Metrics.AttemptsPerCall, lo.Policy, FormatShare(lo.Metrics.SuccessRate),
		hi.Metrics.AttemptsPerCall, hi.Policy, FormatShare(hi.Metrics.SuccessRate))
}

// PolicyDoc describes a standard policy as a scenario with parameters p
// runs it (one line, for the legends under the tables). In a simulated
// model every client process owns its budget and breaker; in a live run
// Options.Scope says who shares them.
func PolicyDoc(name string, p PolicyParams) string {
	canon, ok := CanonicalPolicy(name)
	if !ok {
		return ""
	}
	attempts := "up to 4 attempts"
	switch {
	case p.MaxAttempts < 0:
		attempts = "no attempt limit"
	case p.MaxAttempts > 0:
		attempts = fmt.Sprintf("up to %d attempts", p.MaxAttempts)
	}
	if p.MaxElapsed > 0 {
		attempts += fmt.Sprintf(" within %v", p.MaxElapsed)
	}
	base, top := cmp.Or(p.Base, 100*time.Millisecond), cmp.Or(p.Max, 10*time.Second)
	sched := fmt.Sprintf("backoff from %v doubling to at most %v", base, top)
	bud := budget.TenPercent()
	if p.Budget != nil {
		bud = *p.Budget
	}
	budgetDoc := fmt.Sprintf("a retry budget (budget.Ratio: %g tokens, +%g per successful first try, a retry costs %g)",
		cmp.Or(bud.MaxTokens, 10), cmp.Or(bud.Refill, 0.1), cmp.Or(bud.RetryCost, 1))
	switch canon {
	case PolicyNoRetry:
		return "one attempt, no retries"
	case PolicyImmediate:
		return "up to 3 retries at once, without waiting"
	case PolicyFixed:
		return fmt.Sprintf("retries every %v (%s)", cmp.Or(p.Interval, time.Second), attempts)
	case PolicyExponential:
		return sched + ", without jitter (" + attempts + ")"
	case PolicyEqual:
		return sched + ", equal jitter: half the delay fixed, half random (" + attempts + ")"
	case PolicyFull:
		return sched + ", full jitter: a random delay up to it (" + attempts + ")"
	case PolicyDecorrelated:
		return "decorrelated jitter: each delay random between the base and 3x the previous (" + attempts + ")"
	case PolicyBudget:
		return "full jitter as above, plus " + budgetDoc
	case PolicyGuarded:
		return "full+budget plus a circuit breaker (opens at 50% failures of at least 20 calls in 10s, probes after 5s)"
	}
	return ""
}

// policyLegend returns the definitions of the policies of a report's rows.
func policyLegend(names []string, custom map[string]Variant, params PolicyParams) [][2]string {
	var out [][2]string
	for _, n := range names {
		doc := ""
		if v, ok := custom[n]; ok {
			doc = v.Doc
		} else {
			doc = PolicyDoc(n, params)
		}
		if doc != "" {
			out = append(out, [2]string{n, doc})
		}
	}
	return out
}
