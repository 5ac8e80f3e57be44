package budget_test

import (
	"testing"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// Deposits and withdrawals are on the path of every call and must not
// allocate.
func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation")
	}
	r := budget.NewRatio(awsretry.StandardLegacy())
	g := budget.NewRatio(budget.GRPC())
	w := budget.NewWindow(budget.WindowConfig{Clock: clocktest.NewFake()})
	c := budget.NewConcurrency(budget.ConcurrencyConfig{})
	timeout := error(netTimeout{})
	emptyR := budget.NewRatio(budget.RatioConfig{StartEmpty: true})
	emptyW := budget.NewWindow(budget.WindowConfig{Ratio: -1, MinRetriesPerSecond: -1, Clock: clocktest.NewFake()})
	emptyC := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: -1})
	for name, f := range map[string]func(){
		"Ratio.Record":           func() { r.Record(false, nil); r.Record(true, errDown) },
		"Ratio.Withdraw":         func() { r.Withdraw(errDown); r.Record(true, nil) },
		"Ratio.Withdraw/timeout": func() { r.Withdraw(timeout); r.Withdraw(errSlow) },
		"Ratio.Record/gRPC":      func() { g.Record(false, errDown); g.Withdraw(errDown); g.Record(true, nil) },
		"Ratio.Available":        func() { r.Available(); r.Stats() },
		"Window.Record":          func() { w.Record(false, nil) },
		"Window.Withdraw":        func() { w.Withdraw(errDown) },
		"Window.Available":       func() { w.Available(); w.Stats() },
		"Concurrency":            func() { c.Start(false); c.Record(false, errDown); c.Withdraw(errDown); c.Refund() },
		"refused":                func() { emptyR.Withdraw(errDown); emptyW.Withdraw(errDown); emptyC.Withdraw(errDown) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
