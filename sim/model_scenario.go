package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ModelSpec describes a scenario built on a Model: the model, the policies
// compared and, optionally, a sweep of cases that each adjust the model.
type ModelSpec struct {
	// Name is what the command line calls the scenario (required); Title
	// is its one-line summary, the report's title unless TitleFor gives
	// one; Doc describes the model and what the scenario shows, the
	// report's Description. As for Scenario.
	Name, Title, Doc string
	// TitleFor, if set, builds the report's title from the model as run
	// (after Options changed its clients or duration); Title stays the
	// scenario's one-line summary in listings.
	TitleFor func(m *Model) string
	// Model is the model every case starts from (a copy each), with
	// Options' Clients and Duration applied; NewModelScenario refuses one
	// that does not Validate or has no baseline (CheckBaseline).
	Model Model
	// Params configure the standard policies.
	Params PolicyParams
	// Policies is the default set compared: standard names or names of
	// Custom variants.
	Policies []string
	// Custom are the scenario's own contenders.
	Custom []Variant
	// Cases sweep a parameter, or set the model up in a few distinct ways;
	// nil runs the model as it is.
	Cases []ModelCase
	// SweepLabel names the swept parameter on plots. With a SweepLabel the
	// cases are a sweep, shown as one table with a column per case; without,
	// each case gets a table and charts of its own.
	SweepLabel string
	// Columns are the metric columns of the tables (see ColumnKeys).
	// nil: DefaultColumns, or success and attempts/call for a sweep.
	Columns []string
	// Trials is the default number of trials.
	Trials int
	// TailVerdict makes each case's verdict compare the policies' p99.9
	// too (see CaseVerdict).
	TailVerdict bool
}

// ModelCase is one setting of a sweep.
type ModelCase struct {
	// Name names the case (Case.Name) in tables, verdicts and errors
	// ("clients=800", "half capacity for 60s").
	Name string
	// X is the case's value on plots.
	X float64
	// Apply adjusts a copy of the model (whose Tiers and Faults slices are
	// copies too).
	Apply func(*Model)
	// Note, if set, adds a note under the case's table, computed from its
	// results ("" for none).
	Note func(*Case) string
}

// NewModelScenario checks spec and returns its Scenario.
func NewModelScenario(spec ModelSpec) (*Scenario, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("%w: a scenario needs a name", ErrScenario)
	}
	if err := spec.Model.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", spec.Name, err)
	}
	if err := spec.Model.CheckBaseline(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", spec.Name, err)
	}
	for _, k := range spec.Columns {
		if _, ok := LookupColumn(k); !ok {
			return nil, fmt.Errorf("%w: unknown column %q (want one of %s)", ErrScenario, k, strings.Join(ColumnKeys(), ", "))
		}
	}
	custom := map[string]Variant{}
	for _, v := range spec.Custom {
		if v.Name == "" {
			return nil, fmt.Errorf("%w: %s: a custom policy needs a name", ErrScenario, spec.Name)
		}
		if _, dup := custom[v.Name]; dup {
			return nil, fmt.Errorf("%w: %s: policy %q defined twice", ErrScenario, spec.Name, v.Name)
		}
		custom[v.Name] = v
	}
	policies := spec.Policies
	if len(policies) == 0 {
		policies = PolicyNames()
	}
	sc := &Scenario{
		Name: spec.Name, Title: spec.Title, Doc: spec.Doc, Policies: policies, Trials: max(spec.Trials, 1),
		own: func(n string) bool { _, ok := custom[n]; return ok },
	}
	sc.known = func(n string) bool {
		if sc.own(n) {
			return true
		}
		_, ok := CanonicalPolicy(n)
		return ok
	}
	for _, p := range policies {
		if !sc.KnownPolicy(p) {
			return nil, fmt.Errorf("%w: %s: unknown policy %q", ErrPolicy, spec.Name, p)
		}
	}
	sc.run = func(ctx context.Context, o *Options) (*Report, error) {
		return runModelSpec(ctx, &spec, custom, o)
	}
	return sc, nil
}

// variantFor resolves a policy name to the contender it stands for.
func variantFor(name string, custom map[string]Variant, params PolicyParams) (Variant, error) {
	if v, ok := custom[name]; ok {
		return v, nil
	}
	p, err := StandardPolicy(name, params)
	if err != nil {
		return Variant{}, err
	}
	return Single(p), nil
}

// copyModel returns a copy of m whose slices can be changed freely.
func copyModel(m Model) Model {
	m.Tiers = slices.Clone(m.Tiers)
	m.Faults = slices.Clone(m.Faults)
	return m
}

func runModelSpec(ctx context.Context, spec *ModelSpec, custom map[string]Variant, o *Options) (*Report, error) {
	cases := spec.Cases
	if len(cases) == 0 {
		cases = []ModelCase{{}}
	}
	models := make([]Model, len(cases))
	for i, c := range cases {
		m := copyModel(spec.Model)
		if c.Apply != nil {
			c.Apply(&m)
		}
		if o.Clients > 0 {
			m.Clients = o.Clients
		}
		if o.Duration > 0 {
			m.Duration = o.Duration
		}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("scenario %s case %q: %w", spec.Name, c.Name, err)
		}
		if err := m.CheckBaseline(); err != nil {
			return nil, fmt.Errorf("scenario %s case %q: %w", spec.Name, c.Name, err)
		}
		models[i] = m
	}
	variants := make([]Variant, len(o.Policies))
	for i, name := range o.Policies {
		v, err := variantFor(name, custom, spec.Params)
		if err != nil {
			return nil, err
		}
		v.Name = name
		variants[i] = v
	}

	nc, np, nt := len(cases), len(variants), o.Trials
	// The reference of every trial of a case: its workload without its
	// faults and without retries, measured over the case's own windows.
	// Every policy's peak× is its peak over the reference's baseline load
	// (one baseline for every policy: what a policy adds in steady state,
	// hedging above all, counts), and the references' own peak× is the
	// case's noise floor.
	refs := make([]*Result, nc*nt)
	err := parallel(ctx, o.Workers, len(refs), nil, func(i int) error {
		c, t := i/nt, i%nt
		m := copyModel(models[c])
		m.Faults, m.windows = nil, models[c].Faults
		res, err := RunContext(ctx, &m, Single(Policy{Name: "no-fault", MaxAttempts: 1}), unitSeed(o.Seed, c, t))
		if err != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("scenario %s case %q reference: %w", spec.Name, cases[c].Name, err)
			}
			return err
		}
		res.Series = Series{}
		refs[i] = res
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	results := make([]*Result, nc*np*nt)
	if err == nil {
		err = parallel(ctx, o.Workers, len(results), o.Progress, func(i int) error {
			c, p, t := i/(np*nt), (i/nt)%np, i%nt
			res, err := RunContext(ctx, &models[c], variants[p], unitSeed(o.Seed, c, t))
			if err != nil {
				if ctx.Err() == nil {
					err = fmt.Errorf("scenario %s case %q policy %s: %w", spec.Name, cases[c].Name, variants[p].Name, err)
				}
				return err
			}
			rebase(&res.Metrics, refs[c*nt+t])
			results[i] = res
			return nil
		})
	}
	partial := err != nil && ctx.Err() != nil
	if err != nil && !partial {
		return nil, err
	}
	floors := make([]float64, nc)
	for c := range floors {
		var amps []float64
		for t := 0; t < nt; t++ {
			if r := refs[c*nt+t]; r != nil {
				amps = append(amps, r.Metrics.Amplification)
			}
		}
		floors[c] = Mean(ampsMetrics(amps)).Amplification
	}

	rep := &Report{}
	if partial {
		// Cancelled: report what the finished trials measured.
		rep.Partial = true
		for _, r := range results {
			if r != nil {
				rep.TrialsDone++
			}
		}
	}
	for c := range cases {
		m := &models[c]
		kase := Case{Name: cases[c].Name, CapacityPerS: capacity(m), AmpNoiseFloor: floors[c], TrafficEndS: m.Duration.Seconds(), tail: spec.TailVerdict}
		if s, e, ok := FaultWindow(m.Faults); ok {
			kase.FaultStartS, kase.FaultEndS = s.Seconds(), e.Seconds()
		}
		kase.capX, kase.capY = capacitySteps(m)
		for p := range variants {
			ms := make([]Metrics, 0, nt)
			for t := 0; t < nt; t++ {
				if r := results[(c*np+p)*nt+t]; r != nil {
					ms = append(ms, r.Metrics)
					rep.Events += r.Events
				}
			}
			if len(ms) == 0 {
				// A cancelled run that finished no trial of the policy.
				kase.Rows = append(kase.Rows, Row{Policy: variants[p].Name, NotRun: true})
				continue
			}
			mean := Mean(ms)
			if len(ms) > 1 {
				amps, succ := make([]float64, len(ms)), make([]float64, len(ms))
				for i := range ms {
					amps[i], succ[i] = ms[i].Amplification, ms[i].SuccessRate
				}
				mean.AmplificationCI, mean.SuccessCI = CIHalfWidth(amps), CIHalfWidth(succ)
			}
			// The charts show the first finished trial; notes read them all.
			var all []Series
			for t := 0; t < nt; t++ {
				if r := results[(c*np+p)*nt+t]; r != nil {
					all = append(all, r.Series)
				}
			}
			series := all[0]
			kase.Rows = append(kase.Rows, Row{Policy: variants[p].Name, Metrics: &mean, Series: &series, trials: all})
		}
		rep.Cases = append(rep.Cases, kase)
	}
	if spec.TitleFor != nil {
		rep.Title = spec.TitleFor(&models[0])
	}
	present(rep, spec, cases)
	rep.PolicyLegend = policyLegend(o.Policies, custom, spec.Params)
	if sweepOf(spec) {
		rep.Verdict = []string{sweepVerdict(rep, 0, len(rep.Cases))}
	} else {
		for i := range rep.Cases {
			rep.Verdict = append(rep.Verdict, JudgeCase(&rep.Cases[i]).String())
		}
	}
	if !sweepOf(spec) {
		for i := range cases {
			if cases[i].Note != nil {
				if n := cases[i].Note(&rep.Cases[i]); n != "" {
					rep.Tables[i].Notes = append(rep.Tables[i].Notes, n)
				}
			}
		}
	}
	if note := asRun(&spec.Model, &models[0]); note != "" {
		rep.Description = note + spec.Doc
	}
	if partial {
		for i := range rep.Tables {
			rep.Tables[i].Notes = append(rep.Tables[i].Notes, fmt.Sprintf("partial: cancelled after %d of %d trials", rep.TrialsDone, len(results)))
		}
		return rep, err
	}
	return rep, nil
}

// rebase measures m, a policy's trial, against ref, the reference run of
// the same trial: ReferenceLoad is ref's baseline load, Amplification and
// AmplificationAfter are m's peaks over it, and SteadyLoad is m's own
// baseline load over it.
func rebase(m *Metrics, ref *Result) {
	base := ref.Metrics.BaselineLoad
	m.ReferenceLoad = base
	m.Amplification = ratio(m.PeakLoad, base)
	m.AmplificationAfter = ratio(m.PeakLoadAfter, base)
	m.SteadyLoad = ratio(m.BaselineLoad, base)
}

// ampsMetrics wraps peak× values as Metrics, for their Mean.
func ampsMetrics(amps []float64) []Metrics {
	ms := make([]Metrics, len(amps))
	for i, a := range amps {
		ms[i].Amplification = a
	}
	return ms
}

// capacity returns the measured tier's requests per second at full
// strength, or 0 when it is unbounded.
func capacity(m *Model) float64 {
	t := m.Tiers[m.MeasureTier()]
	mean := t.Service.Mean()
	if t.Workers == 0 || mean <= 0 {
		return 0
	}
	return float64(t.Workers) / mean.Seconds()
}

// capacitySteps returns the measured tier's capacity (requests per second)
// as a step function of time, from 0 and at every start and end of a
// capacity fault on it, or nil when no capacity fault changes it or the
// tier is unbounded.
func capacitySteps(m *Model) (xs, ys []float64) {
	ti := m.MeasureTier()
	t := m.Tiers[ti]
	mean := t.Service.Mean()
	if t.Workers == 0 || mean <= 0 {
		return nil, nil
	}
	at := []time.Duration{0}
	for _, f := range m.Faults {
		if f.Kind == FaultCapacity && f.Tier == ti {
			at = append(at, f.Start, f.End)
		}
	}
	if len(at) == 1 {
		return nil, nil
	}
	slices.Sort(at)
	at = slices.Compact(at)
	for _, x := range at {
		w := t.Workers
		for _, f := range m.Faults {
			if f.Kind == FaultCapacity && f.Tier == ti && f.active(x) {
				w = min(w, CapacityWorkers(t.Workers, f.Factor))
			}
		}
		xs, ys = append(xs, x.Seconds()), append(ys, float64(w)/mean.Seconds())
	}
	return xs, ys
}

// present builds the tables and plots of a model scenario's report.
func present(rep *Report, spec *ModelSpec, cases []ModelCase) {
	keys := spec.Columns
	sweep := sweepOf(spec)
	if len(keys) == 0 {
		keys = DefaultColumns
		if sweep {
			keys = []string{"success", "apc"}
		}
	}
	cols := make([]Column, len(keys))
	for i, k := range keys {
		cols[i], _ = LookupColumn(k)
	}
	if sweep {
		// One table: a row per policy, a column per case; each cell joins
		// the metrics with " / ".
		var names []string
		for _, col := range cols {
			names = append(names, col.Header)
		}
		t := Table{Title: cmp.Or(rep.Title, spec.Title), Header: []string{"policy"}, Notes: []string{"each cell: " + strings.Join(names, " / ")}}
		for _, c := range rep.Cases {
			t.Header = append(t.Header, c.Name)
		}
		for p := range rep.Cases[0].Rows {
			row := []string{rep.Cases[0].Rows[p].Policy}
			for _, c := range rep.Cases {
				var cells []string
				for _, col := range cols {
					if c.Rows[p].NotRun || c.Rows[p].Metrics == nil {
						cells = []string{"not run"}
						break
					}
					cells = append(cells, col.Cell(c.Rows[p].Metrics))
				}
				row = append(row, strings.Join(cells, " / "))
			}
			t.Rows = append(t.Rows, row)
		}
		rep.Tables = append(rep.Tables, t)
		for _, col := range cols {
			pl := Plot{Title: spec.Title + ": " + col.Header, XLabel: spec.SweepLabel, YLabel: col.Header}
			for p := range rep.Cases[0].Rows {
				ln := Line{Name: rep.Cases[0].Rows[p].Policy}
				for i, c := range rep.Cases {
					if c.Rows[p].NotRun || c.Rows[p].Metrics == nil {
						continue
					}
					ln.X = append(ln.X, cases[i].X)
					ln.Y = append(ln.Y, sweepValue(col.Key, c.Rows[p].Metrics))
				}
				pl.Lines = append(pl.Lines, ln)
			}
			rep.Plots = append(rep.Plots, pl)
		}
		return
	}
	for _, c := range rep.Cases {
		title := cmp.Or(rep.Title, spec.Title)
		if c.Name != "" {
			title += " (" + c.Name + ")"
		}
		t := MetricsTable(title, cols, c.Rows)
		if n := caseTrials(&c); n > 1 {
			t.Notes = append(t.Notes, fmt.Sprintf("±: the 95%% confidence interval of the mean over the %d trials (Student's t with %d degrees of freedom: %.2f standard errors); "+
				"≈ marks a peak× whose interval overlaps the lowest one's: not told apart from it", n, n-1, TQuantile95(n-1)))
		}
		if c.AmpNoiseFloor > 0 && slices.Contains(keys, "amp") {
			t.Notes = append(t.Notes, fmt.Sprintf("peak× noise floor %.2fx: the same workload with no fault and no retries reads that much; differences below it are noise", c.AmpNoiseFloor))
		}
		rep.Tables = append(rep.Tables, t)
		rep.Plots = append(rep.Plots, loadPlots(&c, spec.Model.Tiers[spec.Model.MeasureTier()].Name)...)
	}
}

// caseTrials returns the most trials a row of c is the mean of.
func caseTrials(c *Case) int {
	n := 0
	for _, r := range c.Rows {
		if r.Metrics != nil && !r.NotRun {
			n = max(n, r.Metrics.Trials)
		}
	}
	return n
}

// sweepOf reports whether spec's cases are a sweep (one table, a column
// per case) rather than distinct settings (a table each).
func sweepOf(spec *ModelSpec) bool { return len(spec.Cases) > 0 && spec.SweepLabel != "" }

// sweepValue is the number a sweep plot shows for a column.
func sweepValue(key string, m *Metrics) float64 {
	switch key {
	case "success":
		return 100 * m.SuccessRate
	case "inrun":
		return 100 * m.SuccessInRun
	case "apc":
		return m.AttemptsPerCall
	case "amp":
		return m.Amplification
	case "after":
		return m.AmplificationAfter
	case "steady":
		return m.SteadyLoad
	case "fapc":
		return m.FaultAttemptsPerCall
	case "goodput":
		return m.Goodput
	case "recovery":
		return m.RecoveryS
	case "p50":
		return m.P50ms
	case "p99":
		return m.P99ms
	case "p999":
		return m.P999ms
	case "sync":
		return 100 * m.SyncShare
	case "kurt":
		return m.Kurtosis
	case "conc":
		return m.PeakConcurrency
	case "queue":
		return m.PeakQueue
	case "inflight":
		return m.PeakInFlight
	default:
		return m.Attempts
	}
}

// loadPlots returns an overview of every policy's offered load, then one
// plot per policy with load, retries, goodput and failures over time.
func loadPlots(c *Case, tier string) []Plot {
	xs := func(s *Series) []float64 {
		x := make([]float64, len(s.Load))
		for i := range x {
			x[i] = float64(i) * s.StepMS / 1000
		}
		return x
	}
	group := "Load over time"
	if c.Name != "" {
		group += " (" + c.Name + ")"
	}
	title := "Offered load"
	if tier != "" {
		title = "Offered load on the " + tier
	}
	var end []Mark
	if c.TrafficEndS > 0 {
		end = []Mark{{X: c.TrafficEndS, Label: "end of traffic"}}
	}
	// The overview: at most MaxLinesPerPlot policies a panel, so that each
	// line can be told apart (small multiples beyond that).
	var overs []Plot
	panels := (len(c.Rows) + MaxLinesPerPlot - 1) / MaxLinesPerPlot
	for i := 0; i < panels; i++ {
		t := title
		if panels > 1 {
			t = fmt.Sprintf("%s (%d of %d)", title, i+1, panels)
		}
		overs = append(overs, Plot{Title: t, XLabel: "time (s)", YLabel: "attempts/s", Marks: end,
			ShadeFrom: c.FaultStartS, ShadeTo: c.FaultEndS, HLine: c.CapacityPerS, HLineLabel: "capacity", HLineX: c.capX, HLineY: c.capY, Group: group})
	}
	out := []Plot{}
	for i, r := range c.Rows {
		s := r.Series
		if r.NotRun || s == nil {
			continue
		}
		x := xs(s)
		over := &overs[i/MaxLinesPerPlot]
		over.Lines = append(over.Lines, Line{Name: r.Policy, X: x, Y: s.Load})
		marks := slices.Clone(end)
		if c.FaultEndS > c.FaultStartS {
			for _, w := range Waves(s.Retries, s.StepMS, c.FaultStartS) {
				marks = append(marks, Mark{X: c.FaultStartS + w, Label: fmt.Sprintf("wave +%.1fs", w)})
			}
		}
		out = append(out, Plot{
			Title: r.Policy, XLabel: "time (s)", YLabel: "per second", Marks: marks,
			ShadeFrom: c.FaultStartS, ShadeTo: c.FaultEndS, HLine: c.CapacityPerS, HLineLabel: "capacity", HLineX: c.capX, HLineY: c.capY, Group: group,
			Lines: []Line{
				{Name: "attempts", X: x, Y: s.Load},
				{Name: "retries", X: x, Y: s.Retries},
				{Name: "successful calls", X: x, Y: s.Goodput},
				{Name: "failed calls", X: x, Y: s.Failed},
			},
		})
	}
	return append(overs, out...)
}

// MaxLinesPerPlot is the most lines a load chart draws in one panel.
const MaxLinesPerPlot = 5
