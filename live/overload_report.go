package live

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// OverloadTitle is the start of RunOverload's table titles.
const OverloadTitle = "Live server-side control"

func (r *OverloadReport) title() string {
	if r.Options.Scenario == FailAtScaleScenario {
		return OverloadTitle + ": Fail at Scale's queue at 2x overload, a plain FIFO queue against CoDel and adaptive LIFO"
	}
	return OverloadTitle + ": metastable failure, naive clients retrying once, only the server protecting itself"
}

// recoveryText is sim's recovery cell: the time, "stuck" or
// "unobserved".
func recoveryText(m *sim.Metrics) string {
	switch {
	case m.Recovered == 0 && m.Unobserved >= 1:
		return "unobserved"
	case m.Recovered == 0:
		return "stuck"
	}
	return fmt.Sprintf("%.1fs", m.RecoveryS)
}

// Tables renders the report, one sim.Table per case.
func (r *OverloadReport) Tables() []sim.Table {
	var out []sim.Table
	for _, c := range r.Cases {
		m := c.Case.Model
		t := sim.Table{
			Title: fmt.Sprintf("%s (%s; %d workers, %.0f/s of capacity, %.0f calls/s)", r.title(), c.Case.Name, m.Workers, m.Capacity(), m.Rate*float64(m.Clients)),
			Header: []string{"control", "goodput", "of capacity", "virtual", "offered", "virtual", "served in time", "virtual",
				"wait p50", "virtual", "wait p99", "virtual", "shed", "virtual", "recovery", "virtual", "lag"},
			Notes: []string{
				fmt.Sprintf("over %s (%.1fs to %.1fs): goodput (calls/s that succeeded), offered (attempts/s sent), served in time (of the requests whose service started, the share whose caller still waited when it ended), waits (arrival at the database to the start of service) and shed (the share of arrivals answered 503); recovery over the whole run, as in sim",
					c.Case.WindowDoc, m.Window[0].Seconds(), m.Window[1].Seconds()),
				"virtual: sim.RunOverload at the same parameters and seed (one trial)",
				"lag: how late the clients started a call against their schedule at worst (a check on the harness)",
			},
		}
		for _, row := range c.Rows {
			s, v := row.Stats, row.Virtual.Stats
			t.Rows = append(t.Rows, []string{row.Control.Name,
				fmt.Sprintf("%.0f/s", s.Goodput), sim.FormatShare(s.GoodputShare), sim.FormatShare(v.GoodputShare),
				fmt.Sprintf("%.0f/s", s.Offered), fmt.Sprintf("%.0f/s", v.Offered),
				sim.FormatShare(s.InTime), sim.FormatShare(v.InTime),
				sim.FormatMS(s.WaitP50ms), sim.FormatMS(v.WaitP50ms), sim.FormatMS(s.WaitP99ms), sim.FormatMS(v.WaitP99ms),
				sim.FormatShare(s.Shed), sim.FormatShare(v.Shed),
				recoveryText(&row.Metrics), recoveryText(&row.Virtual.Metrics),
				row.StartLagMax.Round(time.Millisecond).String()})
		}
		out = append(out, t)
	}
	return out
}

// WriteTo prints the report's tables to w.
func (r *OverloadReport) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, t := range r.Tables() {
		k, err := t.WriteTo(w)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Table returns the first case's table (the command's printers take
// every case's from Sim).
func (r *OverloadReport) Table() sim.Table {
	if ts := r.Tables(); len(ts) > 0 {
		return ts[0]
	}
	return sim.Table{Title: r.title()}
}

// far lists the figures of a row more than 20% from the virtual ones
// (shares below 10 points and waits below 5ms are compared in absolute
// terms, 2 points and 1ms: 20% of nothing is noise).
func (row OverloadRow) far() []string {
	s, v := row.Stats, row.Virtual.Stats
	var out []string
	cmp := func(name string, l, vv, floor float64, f func(float64) string) {
		if math.Abs(l-vv) > 0.2*math.Max(math.Abs(vv), floor) {
			out = append(out, fmt.Sprintf("%s %s against %s", name, f(l), f(vv)))
		}
	}
	cmp("goodput", s.GoodputShare, v.GoodputShare, 0.1, sim.FormatShare)
	cmp("in time", s.InTime, v.InTime, 0.1, sim.FormatShare)
	cmp("wait p50", s.WaitP50ms, v.WaitP50ms, 5, sim.FormatMS)
	return out
}

// Verdict states, per case, what the controls did live and how far the
// figures are from the virtual ones.
func (r *OverloadReport) Verdict() []string {
	var out []string
	for _, c := range r.Cases {
		var b strings.Builder
		fmt.Fprintf(&b, "live, %s: ", c.Case.Name)
		var parts []string
		for _, row := range c.Rows {
			parts = append(parts, fmt.Sprintf("%s %s of capacity, %s served in time after a median wait of %s, recovery %s",
				row.Control.Name, sim.FormatShare(row.Stats.GoodputShare), sim.FormatShare(row.Stats.InTime), sim.FormatMS(row.Stats.WaitP50ms), recoveryText(&row.Metrics)))
		}
		b.WriteString(strings.Join(parts, "; "))
		var far []string
		for _, row := range c.Rows {
			if f := row.far(); len(f) > 0 {
				far = append(far, row.Control.Name+" ("+strings.Join(f, ", ")+")")
			}
		}
		if len(far) == 0 {
			b.WriteString(". Goodput, service in time and the median wait are within 20% of the virtual run's for every control.")
		} else {
			fmt.Fprintf(&b, ". More than 20%% from the virtual run: %s.", strings.Join(far, "; "))
		}
		out = append(out, b.String())
	}
	return out
}

// Sim returns the report as a sim.Report for the stormsim command's
// printers and HTML page: a table per case, the verdicts, the controls'
// legend and the cases' capacity.
func (r *OverloadReport) Sim() *sim.Report {
	rep := &sim.Report{
		Scenario: "live:" + r.Options.Scenario, ModelVersion: sim.ModelVersion, Title: r.title(), Seed: r.Options.Seed, Trials: 1,
		Description: "One real loopback server per control — a faultinject worker pool with a real service time, behind layer.Adaptive (the real admission.Limiter), layer.Limit or nothing — and naive clients retrying at once after any failure, beside sim.RunOverload at the same parameters.",
		Tables:      r.Tables(),
		Verdict:     r.Verdict(),
	}
	for _, c := range r.Cases {
		m := c.Case.Model
		kase := sim.Case{Name: c.Case.Name, FaultStartS: m.Trigger.Start.Seconds(), FaultEndS: m.Trigger.End.Seconds(), CapacityPerS: m.Capacity(), TrafficEndS: m.Duration.Seconds()}
		for _, row := range c.Rows {
			mt := row.Metrics
			kase.Rows = append(kase.Rows, sim.Row{Policy: row.Control.Name, Metrics: &mt})
		}
		rep.Cases = append(rep.Cases, kase)
	}
	for _, ctl := range r.Options.Controls {
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{ctl.Name, ctl.Doc})
	}
	return rep
}

// MarshalJSON encodes the report as sim's reports are: snake_case keys,
// durations in seconds, and "scenario" the run's name.
func (r *OverloadReport) MarshalJSON() ([]byte, error) {
	type row struct {
		Control        string            `json:"control"`
		Doc            string            `json:"doc"`
		Stats          sim.OverloadStats `json:"stats"`
		Metrics        sim.Metrics       `json:"metrics"`
		VirtualStats   sim.OverloadStats `json:"virtual_stats"`
		VirtualMetrics sim.Metrics       `json:"virtual_metrics"`
		FarFromVirtual []string          `json:"far_from_virtual"`
		StartLagMaxS   float64           `json:"start_lag_max_s"`
	}
	type kase struct {
		Name         string  `json:"name"`
		Workers      int     `json:"workers"`
		CapacityPerS float64 `json:"capacity_per_s"`
		RatePerS     float64 `json:"rate_per_s"`
		SurgePerS    float64 `json:"surge_per_s"`
		ExtraS       float64 `json:"extra_latency_s"`
		Attempts     int     `json:"attempts"`
		TimeoutS     float64 `json:"timeout_s"`
		DurationS    float64 `json:"duration_s"`
		FaultStartS  float64 `json:"fault_start_s"`
		FaultEndS    float64 `json:"fault_end_s"`
		WindowStartS float64 `json:"window_start_s"`
		WindowEndS   float64 `json:"window_end_s"`
		Rows         []row   `json:"rows"`
	}
	out := struct {
		Scenario   string   `json:"scenario"`
		Title      string   `json:"title"`
		Seed       uint64   `json:"seed"`
		Workers    int      `json:"workers"`
		Scale      float64  `json:"scale"`
		Sequential bool     `json:"sequential"`
		ElapsedS   float64  `json:"elapsed_s"`
		Verdict    []string `json:"verdict"`
		Cases      []kase   `json:"cases"`
	}{Scenario: r.Options.Scenario, Title: r.title(), Seed: r.Options.Seed, Workers: r.Options.Workers, Scale: r.Options.Scale,
		Sequential: r.Options.Sequential, ElapsedS: r.ElapsedS, Verdict: r.Verdict(), Cases: []kase{}}
	for _, c := range r.Cases {
		m := c.Case.Model
		k := kase{Name: c.Case.Name, Workers: m.Workers, CapacityPerS: m.Capacity(), RatePerS: m.Rate * float64(m.Clients), SurgePerS: m.Trigger.Surge,
			ExtraS: m.Trigger.Extra.Seconds(), Attempts: m.Attempts, TimeoutS: m.Timeout.Seconds(), DurationS: m.Duration.Seconds(),
			FaultStartS: m.Trigger.Start.Seconds(), FaultEndS: m.Trigger.End.Seconds(), WindowStartS: m.Window[0].Seconds(), WindowEndS: m.Window[1].Seconds(), Rows: []row{}}
		for _, rw := range c.Rows {
			far := rw.far()
			if far == nil {
				far = []string{}
			}
			k.Rows = append(k.Rows, row{Control: rw.Control.Name, Doc: rw.Control.Doc, Stats: rw.Stats, Metrics: rw.Metrics,
				VirtualStats: rw.Virtual.Stats, VirtualMetrics: rw.Virtual.Metrics, FarFromVirtual: far, StartLagMaxS: rw.StartLagMax.Seconds()})
		}
		out.Cases = append(out.Cases, k)
	}
	return json.Marshal(out)
}
