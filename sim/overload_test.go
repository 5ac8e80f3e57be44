package sim

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
)

// serverRows runs every contender of a server-side case as its scenario
// does (seed 1, 3 trials, the scenario's case index).
func serverRows(t *testing.T, c overloadCase, ci int, ctls []ServerControl) map[string]serverRow {
	t.Helper()
	out := map[string]serverRow{}
	for _, ctl := range ctls {
		r, _, err := runServerCase(context.Background(), c, ci, ctl, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		out[ctl.Name] = r
	}
	return out
}

// Issue 38 item 5: the paper's metastable example with the clients left
// naive (one retry at once after a 1s timeout) and only the database
// protecting itself. With the adaptive limit, CoDel and adaptive LIFO it
// recovers after the trigger in every trial, with goodput at least 90%
// of capacity while overloaded; with no control (and with a static limit
// guessed too high) it stays stuck.
func TestServerSideControlRecoversWithoutClientChange(t *testing.T) {
	cases := metastableServerCases()
	paper := serverRows(t, cases[0], 0, metastableServerControls())
	for _, name := range []string{"none", "static-500"} {
		if m := paper[name].Metrics; m.Recovered != 0 {
			t.Errorf("paper, %s: recovered in %.0f%% of the trials, want stuck (the metastable failure)", name, 100*m.Recovered)
		}
	}
	a := paper["adaptive"]
	if a.Metrics.Recovered != 1 || a.Metrics.RecoveryS > 5 {
		t.Errorf("paper, adaptive: recovered in %.0f%% of the trials after %.1fs, want every trial within 5s", 100*a.Metrics.Recovered, a.Metrics.RecoveryS)
	}
	if a.Stats.GoodputShare < 0.9 {
		t.Errorf("paper, adaptive: goodput %.0f/s (%.1f%% of capacity) after the trigger, want at least 90%%", a.Stats.Goodput, 100*a.Stats.GoodputShare)
	}
	surge := serverRows(t, cases[1], 1, metastableServerControls())
	if s := surge["adaptive"].Stats; s.GoodputShare < 0.9 || s.Offered < 1.5*cases[1].Model.Capacity() {
		t.Errorf("surge, adaptive: goodput %.1f%% of capacity for %.0f/s offered, want at least 90%% under an overload of at least 1.5x", 100*s.GoodputShare, s.Offered)
	}
	if s := surge["none"].Stats; s.GoodputShare > 0.5 {
		t.Errorf("surge, none: goodput %.1f%% of capacity, want the collapse (under 50%%)", 100*s.GoodputShare)
	}
	if m := surge["adaptive"].Metrics; m.Recovered != 1 {
		t.Errorf("surge, adaptive: recovered in %.0f%% of the trials, want all", 100*m.Recovered)
	}
}

// Issue 38 item 6, Fail at Scale's claim: at 2x overload, requests that
// are served under CoDel and adaptive LIFO wait near the CoDel target
// and goodput stays near capacity; a plain FIFO queue of the same size
// serves almost nothing within the callers' deadlines.
func TestFailAtScaleCoDelServesNearTargetFIFOServesNothingInTime(t *testing.T) {
	c := failAtScaleCase()
	rows := serverRows(t, c, 0, failAtScaleControls())
	target, interval := admission.DefaultQueueTarget, admission.DefaultQueueInterval
	cl := rows["codel+lifo"].Stats
	if cl.Offered < 1.9*c.Model.Capacity() {
		t.Fatalf("offered %.0f/s, want 2x the %.0f/s capacity", cl.Offered, c.Model.Capacity())
	}
	if cl.WaitP50ms > 2*ms(target) || cl.WaitP99ms > ms(interval) {
		t.Errorf("codel+lifo: served requests waited %.1fms (p50), %.1fms (p99); want at most twice the %s target and the %s interval", cl.WaitP50ms, cl.WaitP99ms, target, interval)
	}
	if cl.GoodputShare < 0.95 || cl.InTime < 0.99 {
		t.Errorf("codel+lifo: goodput %.1f%% of capacity, %.1f%% served in time; want at least 95%% and 99%%", 100*cl.GoodputShare, 100*cl.InTime)
	}
	if a := rows["adaptive+codel+lifo"].Stats; a.GoodputShare < 0.95 {
		t.Errorf("adaptive+codel+lifo: goodput %.1f%% of capacity, want at least 95%%", 100*a.GoodputShare)
	}
	if f := rows["fifo"].Stats; f.InTime > 0.01 || f.GoodputShare > 0.05 {
		t.Errorf("fifo: %.1f%% served in time, goodput %.1f%% of capacity; want almost nothing (at most 1%% and 5%%)", 100*f.InTime, 100*f.GoodputShare)
	}
}

// The server-side scenarios run by name (Lookup, stormsim NAME) and stay
// out of the default suite, whose output is unchanged.
func TestNamedScenariosRunByNameOutsideTheDefaultSuite(t *testing.T) {
	var suite []string
	for _, sc := range Scenarios() {
		suite = append(suite, sc.Name)
	}
	for _, sc := range NamedScenarios() {
		if slices.Contains(suite, sc.Name) {
			t.Errorf("%s is in the default suite", sc.Name)
		}
		got, ok := Lookup(sc.Name)
		if !ok || got.Name != sc.Name {
			t.Errorf("Lookup(%q) = %v, %v", sc.Name, got, ok)
		}
	}
	sc, _ := Lookup("fail-at-scale")
	rep, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Policies: []string{"fifo", "codel+lifo"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || len(rep.Tables[0].Rows) != 2 || len(rep.Verdict) != 1 || rep.Scenario != "fail-at-scale" {
		t.Fatalf("report: %d tables, verdict %q", len(rep.Tables), rep.Verdict)
	}
	if _, err := sc.Run(context.Background(), Options{Seed: 1, Duration: time.Second}); err == nil {
		t.Error("a duration override was accepted; the scenario keeps the paper's")
	}
}

// Bad input is refused with the field, not run: a static limit of 0 (no
// protection by mistake), an empty window, a negative queue, absurd
// sizes.
func TestOverloadModelRefusesBadInput(t *testing.T) {
	good := failAtScaleCase().Model
	for _, c := range []struct {
		name string
		edit func(*OverloadModel, *ServerControl)
		want string
	}{
		{"static 0", func(_ *OverloadModel, c *ServerControl) { *c = ServerControl{Name: "s", Kind: ControlStatic} }, "static limit of 0"},
		{"empty window", func(m *OverloadModel, _ *ServerControl) { m.Window[1] = m.Window[0] }, "window"},
		{"negative queue", func(_ *OverloadModel, c *ServerControl) { c.Queue = -1 }, "must not be negative"},
		{"huge clients", func(m *OverloadModel, _ *ServerControl) { m.Clients = 1 << 40 }, "clients"},
		{"NaN surge", func(m *OverloadModel, _ *ServerControl) { m.Trigger.Surge = math.NaN() }, "surge"},
	} {
		m, ctl := good, failAtScaleControls()[0]
		c.edit(&m, &ctl)
		_, err := RunOverload(context.Background(), &m, ctl, 1)
		if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrModel naming %q", c.name, err, c.want)
		}
	}
	hm := badHostModel()
	hm.DownTo = hm.DownFrom
	if _, err := RunHosts(context.Background(), &hm, badHostPolicies()[0], 1); !errors.Is(err, ErrModel) {
		t.Errorf("hosts model with an empty outage: err %v, want ErrModel", err)
	}
}

// Seed 0 repeats like any other seed: the admission Limiter, whose own
// Seed 0 means "draw one at random", gets a fixed seed from the run's.
func TestOverloadSeedZeroRepeats(t *testing.T) {
	m := failAtScaleCase().Model
	var ctl ServerControl
	for _, c := range failAtScaleControls() {
		if c.Kind == ControlAdmission {
			ctl = c
		}
	}
	if ctl.Kind != ControlAdmission {
		t.Fatal("no admission control among failAtScaleControls")
	}
	a, err := RunOverload(context.Background(), &m, ctl, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunOverload(context.Background(), &m, ctl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs at seed 0 differ:\n%+v\n%+v", a.Stats, b.Stats)
	}
}
