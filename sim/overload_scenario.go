package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// namedScenarios are the scenarios that run by name only (stormsim NAME,
// Lookup), outside the default suite, whose output stays as it is.
func namedScenarios() []*Scenario {
	return []*Scenario{newMetastableServerScenario(), newFailAtScaleScenario(), newBadHostScenario()}
}

// NamedScenarios returns the scenarios that run by name only (Lookup
// finds them; Scenarios, the default suite, does not list them). Each
// call returns fresh values.
func NamedScenarios() []*Scenario { return namedScenarios() }

// serverSpec is a server-side comparison: cases of an OverloadModel, each
// run with every contender.
type serverSpec struct {
	name, title, doc string
	cases            []overloadCase
	controls         []ServerControl
	verdict          func(c overloadCase, rows []serverRow) string
}

// serverRow is one contender's figures in one case: the mean over the
// trials.
type serverRow struct {
	Control string
	Metrics Metrics
	Stats   OverloadStats
	series  Series
}

// runServerCase runs every trial of one contender in case ci of a
// scenario seeded with seed.
func runServerCase(ctx context.Context, c overloadCase, ci int, ctl ServerControl, seed uint64, trials int) (serverRow, uint64, error) {
	var ms []Metrics
	var sts []OverloadStats
	var events uint64
	row := serverRow{Control: ctl.Name}
	for t := range trials {
		m := c.Model
		res, err := RunOverload(ctx, &m, ctl, unitSeed(seed, ci, t))
		if err != nil {
			return row, events, err
		}
		if t == 0 {
			row.series = res.Series
		}
		events += res.Events
		ms, sts = append(ms, res.Metrics), append(sts, res.Stats)
	}
	row.Metrics, row.Stats = Mean(ms), meanOverloadStats(sts)
	return row, events, nil
}

func (sp *serverSpec) scenario() *Scenario {
	var names []string
	for _, c := range sp.controls {
		names = append(names, c.Name)
	}
	sc := &Scenario{Name: sp.name, Title: sp.title, Doc: sp.doc, Policies: names, Trials: 3}
	sc.known = func(n string) bool { return slices.Contains(names, n) }
	sc.own = sc.known
	sc.run = sp.run
	return sc
}

func (sp *serverSpec) run(ctx context.Context, o *Options) (*Report, error) {
	if o.Clients > 0 || o.Duration > 0 {
		return nil, fmt.Errorf("%w: %w: %s keeps its clients and duration (the paper's figures)", ErrScenario, ErrIgnoredOption, sp.name)
	}
	type unit struct{ c, p int }
	var units []unit
	for c := range sp.cases {
		for p := range o.Policies {
			units = append(units, unit{c, p})
		}
	}
	rows := make([]serverRow, len(units))
	events := make([]uint64, len(units))
	err := parallel(ctx, o.Workers, len(units), o.Progress, func(i int) error {
		u := units[i]
		ctl := sp.control(o.Policies[u.p])
		var err error
		rows[i], events[i], err = runServerCase(ctx, sp.cases[u.c], u.c, ctl, o.Seed, o.Trials)
		return err
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, e := range events {
		rep.Events += e
	}
	for ci, c := range sp.cases {
		m := c.Model
		kase := Case{Name: c.Name, FaultStartS: m.Trigger.Start.Seconds(), FaultEndS: m.Trigger.End.Seconds(),
			CapacityPerS: m.Capacity(), TrafficEndS: m.Duration.Seconds()}
		var crow []serverRow
		for i, u := range units {
			if u.c != ci {
				continue
			}
			r := rows[i]
			mt, se := r.Metrics, r.series
			kase.Rows = append(kase.Rows, Row{Policy: r.Control, Metrics: &mt, Series: &se})
			crow = append(crow, r)
		}
		rep.Cases = append(rep.Cases, kase)
		rep.Tables = append(rep.Tables, serverTable(sp.title, c, crow))
		if sp.verdict != nil {
			rep.Verdict = append(rep.Verdict, sp.verdict(c, crow))
		}
	}
	for _, n := range o.Policies {
		rep.PolicyLegend = append(rep.PolicyLegend, [2]string{n, sp.control(n).Doc})
	}
	return rep, nil
}

func (sp *serverSpec) control(name string) ServerControl {
	for _, c := range sp.controls {
		if c.Name == name {
			return c
		}
	}
	panic("sim: no server control " + name)
}

func serverTable(title string, c overloadCase, rows []serverRow) Table {
	t := Table{
		Title:  fmt.Sprintf("%s (%s)", title, c.Name),
		Header: []string{"control", "goodput", "of capacity", "offered", "served in time", "wait p50", "wait p99", "shed", "success", "recovery", "p99"},
	}
	for _, r := range rows {
		s, m := r.Stats, r.Metrics
		t.Rows = append(t.Rows, []string{r.Control,
			fmt.Sprintf("%.0f/s", s.Goodput), FormatShare(s.GoodputShare), fmt.Sprintf("%.0f/s", s.Offered),
			FormatShare(s.InTime), FormatMS(s.WaitP50ms), FormatMS(s.WaitP99ms), FormatShare(s.Shed),
			FormatShare(m.SuccessRate), recoveryCell(&m), FormatMS(m.P99ms)})
	}
	w := c.Model.Window
	t.Notes = append(t.Notes, fmt.Sprintf("goodput, offered, served in time, waits and shed over %s (%.0fs to %.0fs); capacity %.0f/s; wait: arrival at the database to the start of service, of the requests served; served in time: of those, the share whose caller still waited when the answer left; success, recovery and p99 over the whole run (recovery as in the other scenarios)",
		c.WindowDoc, w[0].Seconds(), w[1].Seconds(), c.Model.Capacity()))
	return t
}

func findServerRow(rows []serverRow, name string) (serverRow, bool) {
	for _, r := range rows {
		if r.Control == name {
			return r, true
		}
	}
	return serverRow{}, false
}

func newMetastableServerScenario() *Scenario {
	sp := &serverSpec{
		name:     "metastable-server",
		title:    "Metastable failure, server-side control only: naive clients retrying once against a 300/s database",
		cases:    metastableServerCases(),
		controls: metastableServerControls(),
		doc: `The metastable scenario's paper case (Bronson et al., HotOS '21) with the clients left naive and
only the database protecting itself (issue 38). 10 app instances send 28 calls/s each (280/s) as
Poisson processes to a database with 24 workers, service uniform in [60ms, 100ms] (300/s); network
legs |Normal(1ms, 0.2ms)|; an attempt times out after 1s, and the app retries once, at once, after
any failure (a timeout or a 503): the paper's client, in every row. The database serves requests
whose caller has given up.
  paper: from t=20s to t=30s every query takes 1s longer to reach the database and to come back,
  so every attempt times out and the retries double the load to 560/s.
  surge: from t=20s to t=30s as many calls again arrive (560/s), with the network fine: the
  overload itself, over which goodput is measured.
Contenders, at the database only: no control (one unbounded FIFO queue), a static limit
(layer.Limit's rule: at most N requests inside, the rest answered 503 at once) guessed well (50)
and too high (500), and the real admission.Limiter (Gradient2 with its defaults, on the virtual
clock) behind a queue of 100 under CoDel and adaptive LIFO (the rule of admission's queue,
modelled: TestCoDelQueueModelMatchesAdmission checks it against the real one).
Shows whether the system recovers after the trigger with the clients unchanged, and the goodput
while it is overloaded.`,
	}
	sp.verdict = func(c overloadCase, rows []serverRow) string {
		var rec, stuck []string
		for _, r := range rows {
			if r.Metrics.Recovered >= 1 {
				rec = append(rec, fmt.Sprintf("%s (%.1fs)", r.Control, r.Metrics.RecoveryS))
			} else {
				stuck = append(stuck, r.Control)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: ", c.Name)
		if len(rec) > 0 {
			fmt.Fprintf(&b, "%s recovered with the clients unchanged", list(rec))
		}
		if len(stuck) > 0 {
			if len(rec) > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s %s stuck", list(stuck), verb(stuck, "stays", "stay"))
		}
		if a, ok := findServerRow(rows, "adaptive"); ok {
			fmt.Fprintf(&b, ". Over %s the adaptive limit keeps goodput at %s of capacity (%.0f/s for %.0f/s offered)",
				c.WindowDoc, FormatShare(a.Stats.GoodputShare), a.Stats.Goodput, a.Stats.Offered)
			if n, ok := findServerRow(rows, "none"); ok {
				fmt.Fprintf(&b, ", no control at %s", FormatShare(n.Stats.GoodputShare))
			}
		}
		b.WriteString(".")
		return b.String()
	}
	return sp.scenario()
}

func newFailAtScaleScenario() *Scenario {
	sp := &serverSpec{
		name:     "fail-at-scale",
		title:    "Fail at Scale's queue at 2x overload: a plain FIFO queue against CoDel and adaptive LIFO",
		cases:    []overloadCase{failAtScaleCase()},
		controls: failAtScaleControls(),
		doc: `Ben Maurer, "Fail at Scale" (ACM Queue 2015): with CoDel and adaptive LIFO, a server at 2x
overload serves the requests it serves within a few milliseconds of queueing and keeps goodput at
its capacity, where a FIFO queue of the same size serves nothing within its callers' deadlines.
The metastable database (24 workers, service uniform in [60ms, 100ms], 300/s; legs
|Normal(1ms, 0.2ms)|) gets 280 calls/s, and 600/s (2x its capacity) from t=20s to t=50s; each
call makes one attempt under a 1s deadline (no retries, so the overload is exactly 2x). Every
contender has a queue of 1,000: a plain FIFO (a wait of 3.3s once full); the same queue under
admission's CoDel (5ms target once a queue has stood for 100ms, 100ms otherwise) and adaptive
LIFO in front of the 24 workers (admission.Fixed{N: 24}); and the real Gradient2 limit behind the
same queue. Measured from t=25s to t=50s.`,
	}
	sp.verdict = func(c overloadCase, rows []serverRow) string {
		cl, ok1 := findServerRow(rows, "codel+lifo")
		ff, ok2 := findServerRow(rows, "fifo")
		if !ok1 || !ok2 {
			return c.Name + ": run codel+lifo and fifo to compare them."
		}
		return fmt.Sprintf("%s: under CoDel and adaptive LIFO the requests served waited %s (p50) and %s (p99) and goodput held at %s of capacity; the FIFO queue of the same size made them wait %s, %s of them in time: goodput %s of capacity.",
			c.Name, FormatMS(cl.Stats.WaitP50ms), FormatMS(cl.Stats.WaitP99ms), FormatShare(cl.Stats.GoodputShare),
			FormatMS(ff.Stats.WaitP50ms), FormatShare(ff.Stats.InTime), FormatShare(ff.Stats.GoodputShare))
	}
	return sp.scenario()
}
