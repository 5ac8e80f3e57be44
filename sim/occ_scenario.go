package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// AWS OCC scenario settings. The published model computes the n-th
// retry's ceiling as min(cap, base·2^n) with base 5ms, the attempt
// counter incremented before the backoff: 10ms for the first retry.
// backoff.Exponential's n-th ceiling is Base·2^(n-1), so the published
// schedule is Base 10ms. Decorrelated jitter's published form,
// min(cap, U[base, 3·prev]) starting at prev = base, uses the base itself:
// 5ms.
const (
	occBase          = 10 * time.Millisecond
	occDecorrBase    = 5 * time.Millisecond
	occCap           = 2 * time.Second
	occDefaultN      = 100
	occDefaultTrials = 1000
)

// occSweep is the client counts of the aws-occ sweep.
var occSweep = []int{10, 30, 50, 70, 90, 110, 130, 150, 170, 190}

// occPolicies are the policies that apply to the OCC model (every client
// retries until it succeeds, so only the backoff differs).
var occPolicies = []string{PolicyImmediate, PolicyExponential, PolicyEqual, PolicyFull, PolicyDecorrelated}

// occLabel is how tables name a policy in the OCC model.
func occLabel(p string) string {
	if p == PolicyImmediate {
		return "no backoff"
	}
	if p == PolicyExponential {
		return "no jitter"
	}
	return p
}

// occStrategy returns the backoff of policy p in the OCC model, the
// published one: ceilings 10ms, 20ms, 40ms … capped at 2s (Base 10ms), and
// decorrelated jitter from 5ms.
func occStrategy(p string) func(rand.Source) backoff.Strategy {
	j := map[string]backoff.Jitter{PolicyExponential: backoff.None, PolicyEqual: backoff.Equal,
		PolicyFull: backoff.Full, PolicyDecorrelated: backoff.Decorrelated}
	mode, ok := j[p]
	if !ok {
		return nil
	}
	base := occBase
	if mode == backoff.Decorrelated {
		base = occDecorrBase
	}
	return func(src rand.Source) backoff.Strategy {
		return backoff.Exponential{Base: base, Max: occCap, Jitter: mode, Rand: src}
	}
}

func newOCCScenario() *Scenario {
	sc := &Scenario{
		Name:     "aws-occ",
		Title:    "AWS backoff-and-jitter contention model (optimistic concurrency on one row)",
		Policies: occPolicies,
		Trials:   occDefaultTrials,
		Doc: `N clients (default 100) each update one row once with optimistic concurrency control, all
starting at t=0. An attempt is four network legs of |Normal(10ms, sd 2ms)|: read request, read
reply (carrying the row's version), write request carrying that version, write reply. The server
is instant and unlimited: a write with the current version increments it and succeeds, any other
write fails. After a failure the next read reaches the server one leg plus backoff(n) later,
where backoff is the real backoff.Exponential with the policy's jitter, set to the published
model: ceiling min(2s, 5ms·2^n) for the n-th retry (the blog's attempt counter is incremented
before the backoff, so the first retry's ceiling is 10ms: Base 10ms); decorrelated draws
min(2s, U[5ms, 3·prev]) from prev = 5ms (Base 5ms; backoff caps 3·prev at 2s before drawing,
which differs only once 3·prev passes the cap). Calls are server writes; completion is when the last client succeeds.
Reported: mean calls and mean completion time over the trials at N clients, and a sweep of N from
10 to 190 with a tenth of the trials. The published result: full and decorrelated jitter do far
less work than exponential backoff without jitter; equal jitter does slightly more work than
full jitter and takes longer; decorrelated does a little more work than full but finishes sooner.`,
	}
	sc.known = func(n string) bool {
		c, ok := CanonicalPolicy(n)
		return ok && slices.Contains(occPolicies, c)
	}
	sc.run = runOCCScenario
	return sc
}

func runOCCScenario(ctx context.Context, o *Options) (*Report, error) {
	if o.Duration > 0 {
		return nil, fmt.Errorf("%w: %w: aws-occ has no duration: each trial runs until every client has written its row", ErrScenario, ErrIgnoredOption)
	}
	n := occDefaultN
	if o.Clients > 0 {
		n = o.Clients
	}
	sweepTrials := max(o.Trials/10, 1)
	type occCase struct {
		clients, trials int
	}
	cases := []occCase{{n, o.Trials}}
	for _, c := range occSweep {
		cases = append(cases, occCase{c, sweepTrials})
	}
	// Lay out the units: case, policy, trial.
	type unit struct{ c, p, t int }
	var units []unit
	for c, k := range cases {
		for p := range o.Policies {
			for t := 0; t < k.trials; t++ {
				units = append(units, unit{c, p, t})
			}
		}
	}
	results := make([]OCCResult, len(units))
	err := parallel(ctx, o.Workers, len(units), o.Progress, func(i int) error {
		u := units[i]
		m := OCC{Clients: cases[u.c].clients, Backoff: occStrategy(o.Policies[u.p])}
		r, err := RunOCC(m, unitSeed(o.Seed, u.c, u.t))
		results[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}

	rep := &Report{}
	stats := make([][]OCCStats, len(cases))
	i := 0
	for c, k := range cases {
		kase := Case{Name: "clients=" + strconv.Itoa(k.clients)}
		stats[c] = make([]OCCStats, len(o.Policies))
		for p := range o.Policies {
			st := OCCStats{Clients: k.clients, Trials: k.trials}
			comps := make([]float64, k.trials)
			calls := make([]float64, k.trials)
			for t := 0; t < k.trials; t++ {
				r := results[i]
				i++
				rep.Events += r.Events
				st.MeanCalls += float64(r.Calls) / float64(k.trials)
				calls[t] = float64(r.Calls)
				comps[t] = ms(r.Completion)
				st.MeanCompletionMS += comps[t] / float64(k.trials)
				if !r.Done {
					st.Unfinished++
				}
			}
			st.CallsSE, st.CompletionSEMS = StdErr(calls), StdErr(comps)
			slices.Sort(comps)
			st.P95CompletionMS = comps[nearestRank(len(comps), 0.95)]
			st.CallsPerClient = st.MeanCalls / float64(k.clients)
			stats[c][p] = st
			s := st
			kase.Rows = append(kase.Rows, Row{Policy: o.Policies[p], OCC: &s})
		}
		rep.Cases = append(rep.Cases, kase)
	}

	// Tables: the main case, then the sweep.
	t := Table{
		Title:  fmt.Sprintf("AWS OCC contention: %d clients, %d trials", n, o.Trials),
		Header: []string{"policy", "mean calls", "± se", "calls/client", "mean completion", "± se", "p95 completion", "calls vs no jitter"},
		Notes: []string{"published model: ceiling min(2s, 5ms·2^n) for the n-th retry, i.e. backoff.Exponential{Base: 10ms}; decorrelated min(2s, U[5ms, 3·prev]) as backoff's Decorrelated{Base: 5ms} draws it, except that backoff caps 3·prev before drawing (the same unless 3·prev > 2s)",
			"± se: standard error of the mean over the trials; means closer than about two of them are within sampling noise"},
	}
	ref := -1
	for p, name := range o.Policies {
		if name == PolicyExponential {
			ref = p
		}
	}
	for p, name := range o.Policies {
		st := stats[0][p]
		vs := "-"
		if ref >= 0 && stats[0][ref].MeanCalls > 0 {
			vs = fmt.Sprintf("%.2fx", st.MeanCalls/stats[0][ref].MeanCalls)
		}
		t.Rows = append(t.Rows, []string{occLabel(name), fmt.Sprintf("%.0f", st.MeanCalls), fmt.Sprintf("%.1f", st.CallsSE), fmt.Sprintf("%.1f", st.CallsPerClient),
			FormatMS(st.MeanCompletionMS), FormatMS(st.CompletionSEMS), FormatMS(st.P95CompletionMS), vs})
	}
	rep.Tables = append(rep.Tables, t)

	sw := Table{Title: fmt.Sprintf("AWS OCC: mean calls by number of clients (%d trials each)", sweepTrials), Header: []string{"policy"}}
	for _, k := range cases[1:] {
		sw.Header = append(sw.Header, "N="+strconv.Itoa(k.clients))
	}
	callsPlot := Plot{Title: "Work: calls until every client succeeded", XLabel: "clients", YLabel: "mean calls"}
	timePlot := Plot{Title: "Completion time of the last client", XLabel: "clients", YLabel: "mean completion (ms)"}
	for p, name := range o.Policies {
		row := []string{occLabel(name)}
		cl := Line{Name: occLabel(name)}
		tl := Line{Name: occLabel(name)}
		for c := 1; c < len(cases); c++ {
			st := stats[c][p]
			row = append(row, fmt.Sprintf("%.0f", st.MeanCalls))
			cl.X = append(cl.X, float64(st.Clients))
			cl.Y = append(cl.Y, st.MeanCalls)
			tl.X = append(tl.X, float64(st.Clients))
			tl.Y = append(tl.Y, st.MeanCompletionMS)
		}
		sw.Rows = append(sw.Rows, row)
		callsPlot.Lines = append(callsPlot.Lines, cl)
		timePlot.Lines = append(timePlot.Lines, tl)
	}
	rep.Tables = append(rep.Tables, sw)
	rep.Plots = append(rep.Plots, callsPlot, timePlot)
	rep.Verdict = []string{occVerdict(o.Policies, stats[0])}
	for _, name := range o.Policies {
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{occLabel(name), occDocs[name]})
	}
	return rep, nil
}

// occDocs define the OCC model's policies, as the published model has them.
var occDocs = map[string]string{
	PolicyImmediate:    "retry one leg after a failed write, without backoff",
	PolicyExponential:  "wait min(2s, 5ms·2^n) before the n-th retry, without jitter",
	PolicyEqual:        "equal jitter: half of min(2s, 5ms·2^n) fixed, half random",
	PolicyFull:         "full jitter: a random wait up to min(2s, 5ms·2^n)",
	PolicyDecorrelated: "decorrelated jitter: min(2s, a random wait between 5ms and 3x the previous)",
}

// occVerdict names the policies with the least and the most work, and
// the fastest and slowest to finish, at the main case.
func occVerdict(policies []string, st []OCCStats) string {
	lw, hw, lt, ht := 0, 0, 0, 0
	for p := range policies {
		if st[p].MeanCalls < st[lw].MeanCalls {
			lw = p
		}
		if st[p].MeanCalls > st[hw].MeanCalls {
			hw = p
		}
		if st[p].MeanCompletionMS < st[lt].MeanCompletionMS {
			lt = p
		}
		if st[p].MeanCompletionMS > st[ht].MeanCompletionMS {
			ht = p
		}
	}
	return fmt.Sprintf("%s does the least work (%s calls) and %s the most (%s); the last client finishes soonest with %s (%s) and latest with %s (%s).",
		occLabel(policies[lw]), Commas(int(st[lw].MeanCalls+0.5)), occLabel(policies[hw]), Commas(int(st[hw].MeanCalls+0.5)),
		occLabel(policies[lt]), FormatMS(st[lt].MeanCompletionMS), occLabel(policies[ht]), FormatMS(st[ht].MeanCompletionMS))
}
