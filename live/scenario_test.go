package live_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

func TestBuiltinScenarios(t *testing.T) {
	if got := live.Names(); !slices.Equal(got, []string{"gateway-restart", "slow-downstream"}) {
		t.Errorf("Names() = %v", got)
	}
	for _, sc := range live.Scenarios() {
		if err := sc.Validate(0); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
		for _, p := range sc.Policies {
			if !sc.KnownPolicy(p) {
				t.Errorf("%s: default policy %q unknown", sc.Name, p)
			}
		}
		if sc.Title == "" || sc.Doc == "" {
			t.Errorf("%s: undocumented", sc.Name)
		}
	}
	gw, ok := live.Lookup("gateway-restart")
	if !ok {
		t.Fatal("no gateway-restart")
	}
	// The collector's headroom: 1.5x the steady 250 calls/s.
	if c := gw.CapacityPerS(); c != 380 {
		t.Errorf("capacity %v/s, want 380/s", c)
	}
	if !gw.KnownPolicy("naive") || !gw.KnownPolicy("full-jitter") || gw.KnownPolicy("yolo") {
		t.Error("policy names: want naive and aliases accepted, unknown names refused")
	}
	// naive is sim's immediate policy: three retries at once, a cap that
	// holds although the others retry without a count limit.
	if imm, err := sim.StandardPolicy(sim.PolicyImmediate, gw.Params); err != nil || imm.MaxAttempts != 4 || imm.Backoff != nil || len(gw.Custom) != 0 {
		t.Errorf("naive: %+v, %v; want 4 attempts without backoff", imm, err)
	}
	if full, _ := sim.StandardPolicy(sim.PolicyFull, gw.Params); full.MaxAttempts != 0 {
		t.Errorf("full jitter: %d attempts, want no count limit (the call's deadline ends it)", full.MaxAttempts)
	}
	gw.Clients = 1
	if again, _ := live.Lookup("gateway-restart"); again.Clients != 500 {
		t.Error("Lookup returned a shared scenario")
	}
	if _, ok := live.Lookup("nope"); ok {
		t.Error("Lookup found an unknown scenario")
	}
}

func TestValidate(t *testing.T) {
	base := func() live.Scenario {
		return live.Scenario{
			Name: "v", Clients: 10, Duration: time.Second,
			Arrival: sim.Arrival{Kind: sim.Periodic, Interval: 100 * time.Millisecond},
			Server:  live.Server{Service: sim.Const(time.Millisecond), Limit: faultinject.Limit{Concurrency: 2}},
		}
	}
	ok := base()
	if err := ok.Validate(0); err != nil {
		t.Fatalf("valid scenario refused: %v", err)
	}
	for name, change := range map[string]func(*live.Scenario){
		"no clients":      func(s *live.Scenario) { s.Clients = 0 },
		"too many":        func(s *live.Scenario) { s.Clients = live.DefaultMaxClients + 1 },
		"no duration":     func(s *live.Scenario) { s.Duration = 0 },
		"long":            func(s *live.Scenario) { s.Duration = live.MaxDuration + 1 },
		"drain":           func(s *live.Scenario) { s.Drain = -1 },
		"warmup":          func(s *live.Scenario) { s.Warmup = -1 },
		"call timeout":    func(s *live.Scenario) { s.CallTimeout = -1 },
		"reissue":         func(s *live.Scenario) { s.Reissue = live.MaxReissue + 1 },
		"reissue delay":   func(s *live.Scenario) { s.ReissueDelay = -1 },
		"interval":        func(s *live.Scenario) { s.Arrival.Interval = 0 },
		"poisson":         func(s *live.Scenario) { s.Arrival = sim.Arrival{Kind: sim.Poisson} },
		"arrival kind":    func(s *live.Scenario) { s.Arrival.Kind = 9 },
		"rate":            func(s *live.Scenario) { s.Clients, s.Arrival.Interval = 1000, 10*time.Millisecond },
		"limit":           func(s *live.Scenario) { s.Server.Limit.Queue = -1 },
		"fail prob":       func(s *live.Scenario) { s.Server.FailProb = 2 },
		"server timeout":  func(s *live.Scenario) { s.Server.Timeout = -1 },
		"service":         func(s *live.Scenario) { s.Server.Service = sim.Const(-1) },
		"fault window":    func(s *live.Scenario) { s.Faults = []sim.Fault{{Start: 2, End: 1}} },
		"fault prob":      func(s *live.Scenario) { s.Faults = []sim.Fault{{Kind: sim.FaultLoss, End: 1, Prob: 2}} },
		"fault kind":      func(s *live.Scenario) { s.Faults = []sim.Fault{{Kind: 99, End: 1}} },
		"capacity factor": func(s *live.Scenario) { s.Faults = []sim.Fault{{Kind: sim.FaultCapacity, End: 1, Factor: 0}} },
		"capacity limit": func(s *live.Scenario) {
			s.Server.Limit.Concurrency = 0
			s.Faults = []sim.Fault{{Kind: sim.FaultCapacity, End: 1, Factor: 0.5}}
		},
		"latency extra": func(s *live.Scenario) { s.Faults = []sim.Fault{{Kind: sim.FaultLatency, End: 1, Extra: sim.Const(-1)}} },
	} {
		s := base()
		change(&s)
		if err := s.Validate(0); !errors.Is(err, live.ErrScenario) {
			t.Errorf("%s: err = %v, want ErrScenario", name, err)
		}
	}
	if err := ok.Validate(live.MaxClientsLimit + 1); !errors.Is(err, live.ErrScenario) {
		t.Errorf("client limit above MaxClientsLimit: err = %v", err)
	}
}
