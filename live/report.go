package live

import (
	"fmt"
	"slices"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// Report is the result of a live run: one Row per policy, with the
// simulator's metrics measured on the wire plus the live-only measures,
// and ready-made tables and plots.
type Report struct {
	// Scenario is the scenario's name (Scenario.Name).
	Scenario string `json:"scenario"`
	// ModelVersion is sim.ModelVersion: the version of the models and
	// metric definitions the run used.
	ModelVersion int `json:"model_version"`
	// Title is the scenario's Title, or what its TitleFor built from the
	// scenario as run.
	Title string `json:"title"`
	// Description is the scenario's Doc; when Options changed its
	// clients or duration, a first line says what was run instead.
	Description string `json:"description"`
	// Seed is the run's seed (Options.Seed).
	Seed uint64 `json:"seed"`
	// Clients is the number of client goroutines the run started
	// (Options.Clients, or the scenario's).
	Clients int `json:"clients"`
	// DurationS is how long the clients started calls, in seconds
	// (Options.Duration, or the scenario's).
	DurationS float64 `json:"duration_s"`
	// DrainS is the most the run continued after DurationS for calls in
	// flight to end, in seconds (Options.Drain, or the scenario's
	// Drain or its default).
	DrainS float64 `json:"drain_s"`
	// FaultStartS and FaultEndS are the earliest start and the latest
	// end of the scenario's faults, in seconds from the start of the
	// run; both 0 (left out) when it has no fault.
	FaultStartS float64 `json:"fault_start_s,omitempty"`
	FaultEndS   float64 `json:"fault_end_s,omitempty"`
	// CapacityPerS is the server's nominal capacity in requests per
	// second (Scenario.CapacityPerS); 0 (left out) when it is unbounded.
	CapacityPerS float64 `json:"capacity_per_s,omitempty"`
	// Scope is who shared each policy's budget and breaker, as
	// Scope.String names it ("shared", "per-client").
	Scope string `json:"scope"`
	// Sequential says the policies ran one after another
	// (Options.Sequential) rather than at the same time.
	Sequential bool `json:"sequential"`
	// ElapsedS is the run's wall time, in seconds.
	ElapsedS float64 `json:"elapsed_s"`
	// Rows are the policies' results, one per policy compared, in the
	// order of Options.Policies (else the scenario's Policies, else
	// DefaultPolicies()), repeats dropped.
	Rows []Row `json:"rows"`
	// Verdict sums up the rows in a few sentences (sim.JudgeCase).
	Verdict []string `json:"verdict,omitempty"`
	// Tables and Plots present the rows, and PolicyLegend defines each
	// policy compared; they are not part of the JSON.
	Tables       []sim.Table `json:"-"`
	Plots        []sim.Plot  `json:"-"`
	PolicyLegend [][2]string `json:"-"`
}

// Row is one policy's result.
type Row struct {
	// Policy is the policy's name, an alias resolved to the name it
	// stands for (the name Report.Row takes).
	Policy string `json:"policy"`
	// Metrics are sim.Metrics measured on the wire: attempts are those
	// arriving at the server (its offered load), calls and their latency
	// are the clients', attempt outcomes are as the clients saw them,
	// PeakConcurrency counts requests inside the server (queued, in
	// service or hanging), PeakQueue is the injector's longest queue and
	// PeakInFlight the most attempts open at the clients. Reissued calls
	// count as calls.
	Metrics sim.Metrics `json:"metrics"`
	// Extra holds the live-only measures: accounting, wasted work,
	// duplicate executions, entry traffic.
	Extra Extra `json:"live"`
	// Series is the load over time, as sim.Series; Live adds entry
	// traffic, server concurrency and wasted work.
	Series sim.Series `json:"series"`
	Live   Series     `json:"live_series"`
}

// Row returns the row of the named policy.
func (r *Report) Row(policy string) (*Row, bool) {
	for i := range r.Rows {
		if r.Rows[i].Policy == policy {
			return &r.Rows[i], true
		}
	}
	return nil, false
}

func newReport(sc *Scenario, o Options) *Report {
	r := &Report{
		Scenario: sc.Name, ModelVersion: sim.ModelVersion, Title: sc.Title, Description: sc.Doc, Seed: o.Seed,
		Clients: sc.Clients, DurationS: sc.Duration.Seconds(), DrainS: sc.drain().Seconds(),
		CapacityPerS: sc.CapacityPerS(), Scope: o.Scope.String(), Sequential: o.Sequential,
	}
	if s, e, ok := sim.FaultWindow(sc.Faults); ok {
		r.FaultStartS, r.FaultEndS = s.Seconds(), e.Seconds()
	}
	if sc.TitleFor != nil {
		r.Title = sc.TitleFor(sc)
	}
	return r
}

// Sim returns the report as a sim.Report with one case, "live", whose rows
// carry the metrics and series, with the same tables and plots: what the
// stormsim command prints, encodes and charts.
func (r *Report) Sim() *sim.Report {
	c := sim.Case{Name: "live", FaultStartS: r.FaultStartS, FaultEndS: r.FaultEndS, CapacityPerS: r.CapacityPerS, TrafficEndS: r.DurationS}
	for i := range r.Rows {
		row := &r.Rows[i]
		m, s := row.Metrics, row.Series
		c.Rows = append(c.Rows, sim.Row{Policy: row.Policy, Metrics: &m, Series: &s})
	}
	return &sim.Report{
		Scenario: "live:" + r.Scenario, ModelVersion: r.ModelVersion, Title: r.Title, Description: r.Description,
		Seed: r.Seed, Trials: 1, Cases: []sim.Case{c}, Tables: r.Tables, Plots: r.Plots,
		Verdict: r.Verdict, PolicyLegend: r.PolicyLegend,
	}
}

// LagWarning is the start lag (Extra.StartLagMaxMS) from which a report
// warns that the machine did not keep up with the scenario.
const LagWarning = 100 * time.Millisecond

// Legend explains the headers of the live table, in column order.
func Legend() [][2]string {
	return [][2]string{
		{"sent/recv", "attempts the clients wrote on the wire / attempts the server received"},
		{"retries", "retries received by the server (attempt header > 1)"},
		{"wasted", "handler time spent after the caller gave up, and its share of all handler time"},
		{"cut", "handler executions whose caller gave up before they ended"},
		{"dup exec", "executions beyond the first of their Idempotency-Key"},
		{"dup done", "completed executions beyond the first of their key (the work done twice)"},
		{"conc/key", "most executions of one key running at once"},
		{"entry", "first attempts/s: baseline → after errors began (↑: rising by 10% or more; no errors: no attempt failed)"},
		{"lag", "how late, at worst, the clients started a call against their schedule (a check on the harness)"},
	}
}

// wireColumns are the keys of the sim columns of the wire table.
var wireColumns = []string{"amp", "attempts", "apc", "goodput", "success", "inrun", "conc", "queue", "inflight", "recovery", "p50", "p99", "p999", "sync"}

// present builds the tables and plots.
func (r *Report) present() {
	title := r.Title + " (live, " + r.Scope + ")"
	keys := wireColumns
	if r.FaultEndS > 0 {
		keys = slices.Insert(slices.Clone(keys), 1, "after")
	}
	if len(r.Rows) > 0 && r.Rows[0].Metrics.Reports > 0 {
		keys = slices.Insert(slices.Clone(keys), slices.Index(keys, "inrun")+1, "reports")
	}
	cols := make([]sim.Column, len(keys))
	for i, k := range keys {
		cols[i], _ = sim.LookupColumn(k)
	}
	// Two decimals: a live run is judged on 1.25x against 1.3x.
	cols[0].Cell = func(m *sim.Metrics) string { return fmt.Sprintf("%.2fx", m.Amplification) }
	simCase := r.Sim().Cases[0]
	simCase.Name = ""
	r.Verdict = []string{sim.JudgeCase(&simCase).String()}
	wire := sim.MetricsTable(title+": on the wire", cols, simCase.Rows)
	extra := sim.Table{Title: title + ": cancellation, duplicates, entry traffic",
		Header: []string{"policy", "sent/recv", "retries", "wasted", "cut", "dup exec", "dup done", "conc/key", "entry", "lag"}}
	var worstLag float64
	for i := range r.Rows {
		row := &r.Rows[i]
		e := &row.Extra
		entry := fmt.Sprintf("%.0f/s, no errors", e.Entry.BaselinePerS)
		if e.Entry.ErrorsBeganS >= 0 {
			entry = fmt.Sprintf("%.0f→%.0f/s", e.Entry.BaselinePerS, e.Entry.AfterPerS)
			if e.Entry.Rising {
				entry += " ↑"
			}
		}
		extra.Rows = append(extra.Rows, []string{row.Policy,
			fmt.Sprintf("%d/%d", e.ClientSent, e.ServerAttempts), fmt.Sprintf("%d", e.ServerRetries),
			fmt.Sprintf("%.2fs (%s)", e.Wasted.WastedS, sim.FormatShare(e.Wasted.Share)), fmt.Sprintf("%d", e.Wasted.Cancelled),
			fmt.Sprintf("%d", e.Duplicates.DuplicateExecutions), fmt.Sprintf("%d", e.Duplicates.DuplicateCompletions),
			fmt.Sprintf("%d", e.Duplicates.MaxConcurrentPerKey),
			entry,
			sim.FormatMS(e.StartLagMaxMS)})
		worstLag = max(worstLag, e.StartLagMaxMS)
	}
	wire.Notes = []string{fmt.Sprintf("%d clients, %gs, a server on 127.0.0.1 per policy; took %.1fs of wall time", r.Clients, r.DurationS, r.ElapsedS)}
	if worstLag >= millis(LagWarning) {
		wire.Notes = append(wire.Notes, fmt.Sprintf("warning: clients started calls up to %s late: the machine did not keep up, and load peaks may be catch-up bursts of the harness (try Options.Sequential or fewer clients)", sim.FormatMS(worstLag)))
	}
	r.Tables = []sim.Table{wire, extra}
	r.Plots = r.plots()
}

// plots returns the overview of offered load, one plot per policy, and
// overviews of entry traffic, server concurrency and wasted work.
func (r *Report) plots() []sim.Plot {
	group := "Live load over time (" + r.Scenario + ")"
	plot := func(title, y string) sim.Plot {
		return sim.Plot{Title: title, XLabel: "time (s)", YLabel: y, ShadeFrom: r.FaultStartS, ShadeTo: r.FaultEndS, Group: group,
			Marks: []sim.Mark{{X: r.DurationS, Label: "end of traffic"}}}
	}
	load := plot("Offered load on the wire, all policies", "attempts/s")
	load.HLine, load.HLineLabel = r.CapacityPerS, "capacity"
	entry := plot("Entry traffic (first attempts), all policies", "first attempts/s")
	conc := plot("Requests inside the server, all policies", "requests")
	wasted := plot("Handler time wasted on callers that gave up", "handler-s/s")
	var each []sim.Plot
	for i := range r.Rows {
		row := &r.Rows[i]
		s, l := &row.Series, &row.Live
		x := make([]float64, len(s.Load))
		for i := range x {
			x[i] = float64(i) * s.StepMS / 1000
		}
		load.Lines = append(load.Lines, sim.Line{Name: row.Policy, X: x, Y: s.Load})
		entry.Lines = append(entry.Lines, sim.Line{Name: row.Policy, X: x, Y: l.Entry})
		conc.Lines = append(conc.Lines, sim.Line{Name: row.Policy, X: x, Y: l.Concurrency})
		wasted.Lines = append(wasted.Lines, sim.Line{Name: row.Policy, X: x, Y: l.Wasted})
		p := plot(row.Policy, "per second")
		p.HLine, p.HLineLabel = r.CapacityPerS, "capacity"
		p.Lines = []sim.Line{
			{Name: "attempts", X: x, Y: s.Load},
			{Name: "retries", X: x, Y: s.Retries},
			{Name: "successful calls", X: x, Y: s.Goodput},
			{Name: "failed calls", X: x, Y: s.Failed},
		}
		each = append(each, p)
	}
	return append(append([]sim.Plot{load}, each...), entry, conc, wasted)
}
