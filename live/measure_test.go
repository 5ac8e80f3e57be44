package live_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// TestMeasureGatewayRestart runs the acceptance measurement: gateway-restart
// with 500 clients for 20s, every policy at once, and logs the tables. It
// takes about 20s of wall time, so it runs only when
// STORMGUARD_LIVE_MEASURE=1:
//
//	STORMGUARD_LIVE_MEASURE=1 go test -run MeasureGatewayRestart -v ./live/
//
// It checks the acceptance figures: naive (immediate) retries amplify the
// peak load at least 3x; full jitter with the shared budget makes about
// one attempt per delivery and still delivers every report (delayed, not
// lost: the agents keep them in a queue). STORMGUARD_LIVE_SCOPE=per-client gives every client its own budget
// and breaker; STORMGUARD_LIVE_SCENARIO=slow-downstream measures the other
// scenario, STORMGUARD_LIVE_IGNORE_CANCEL=1 a server that does not honour
// cancellation (no figures are checked then), and
// STORMGUARD_LIVE_SEQUENTIAL=1 runs the policies one after another.
func TestMeasureGatewayRestart(t *testing.T) {
	if os.Getenv("STORMGUARD_LIVE_MEASURE") == "" {
		t.Skip("set STORMGUARD_LIVE_MEASURE=1 to run the 20s live measurement")
	}
	name := "gateway-restart"
	if s := os.Getenv("STORMGUARD_LIVE_SCENARIO"); s != "" {
		name = s
	}
	sc, ok := live.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	sc.Server.IgnoreCancel = os.Getenv("STORMGUARD_LIVE_IGNORE_CANCEL") != ""
	o := live.Options{Seed: 1, Sequential: os.Getenv("STORMGUARD_LIVE_SEQUENTIAL") != ""}
	if name == "gateway-restart" {
		o.Clients, o.Duration = 500, 20*time.Second
	}
	if s := os.Getenv("STORMGUARD_LIVE_SCOPE"); s != "" {
		scope, err := live.ParseScope(s)
		if err != nil {
			t.Fatal(err)
		}
		o.Scope = scope
	}
	began := time.Now()
	rep, err := live.Run(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wall time %.1fs", time.Since(began).Seconds())
	for _, tb := range rep.Tables {
		var b strings.Builder
		tb.WriteTo(&b)
		t.Log("\n" + b.String())
	}
	if o.Scope != live.Shared || name != "gateway-restart" || sc.Server.IgnoreCancel {
		return
	}
	naive, _ := rep.Row(sim.PolicyImmediate)
	guarded, _ := rep.Row(sim.PolicyBudget)
	if a := naive.Metrics.Amplification; a < 3 {
		t.Errorf("naive amplification %.2fx, want at least 3x", a)
	}
	// The agents keep their reports in a queue: the shared budget refuses
	// retries (about one attempt per delivery), and the reports it refuses
	// are delayed, not lost.
	if m := guarded.Metrics; m.AttemptsPerCall > 1.05 || m.ReportsDropped > 0 || m.ReportsDelivered < 0.99 {
		t.Errorf("full+budget: %.3f attempts per delivery, %.2f%% of reports delivered, %.2f%% dropped; want about 1, all, none",
			m.AttemptsPerCall, 100*m.ReportsDelivered, 100*m.ReportsDropped)
	}
}
