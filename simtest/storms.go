package simtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// The timeline of every storm run: clients call for stormDuration; the
// baseline is measured from stormWarmup to the trigger at stormStart; the
// trigger ends by stormStart+10s, leaving at least 20s in which recovery
// is judged; calls still open stormDrain after the end count as failed.
const (
	stormWarmup   = 2 * time.Second
	stormStart    = 10 * time.Second
	stormDuration = 40 * time.Second
	stormDrain    = 10 * time.Second
)

// Storm is one trigger of the suite, run against the downstream.
type Storm struct {
	// Name is what --storms and gates.storms call it.
	Name string
	// Title is a few words for tables and sentences.
	Title string
	// Doc says what happens, with the times.
	Doc string
	// Length is how long the trigger lasts, from StormStart.
	Length time.Duration

	faults   func(d Downstream) []sim.Fault
	throttle bool // the failures are 429s (the downstream's quota), not 500s
}

// StormStart is when every storm's trigger begins (after a baseline of
// steady traffic).
const StormStart = stormStart

// Storm names.
const (
	StormOutage       = "outage"
	StormBrownout     = "brownout"
	StormLatencySpike = "latency-spike"
	StormErrors10     = "errors-10"
	StormErrors50     = "errors-50"
	StormThrottle     = "throttle"
)

// Storms returns the storm suite, in the order reports list it.
func Storms() []Storm {
	errs := func(p float64) func(Downstream) []sim.Fault {
		return func(Downstream) []sim.Fault {
			return []sim.Fault{{Kind: sim.FaultErrors, Start: stormStart, End: stormStart + 10*time.Second, Prob: p}}
		}
	}
	return []Storm{
		{
			Name: StormOutage, Title: "short outage", Length: 3 * time.Second,
			Doc: "the gateway restarts at 10s: it drops every request it holds, then answers 503 for 3s",
			faults: func(Downstream) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultRestart, Start: stormStart, End: stormStart + 3*time.Second}}
			},
		},
		{
			Name: StormBrownout, Title: "brownout", Length: 10 * time.Second,
			Doc: "from 10s to 20s only half of the workers serve (capacity halved)",
			faults: func(Downstream) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultCapacity, Start: stormStart, End: stormStart + 10*time.Second, Factor: 0.5}}
			},
		},
		{
			Name: StormLatencySpike, Title: "latency spike", Length: 5 * time.Second,
			Doc: "from 10s to 15s each network leg takes the client timeout longer: every attempt times out, " +
				"while the downstream still serves it (the metastable trigger)",
			faults: func(d Downstream) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultLatency, Start: stormStart, End: stormStart + 5*time.Second, Extra: sim.Const(d.Timeout)}}
			},
		},
		{
			Name: StormErrors10, Title: "10% failures", Length: 10 * time.Second,
			Doc:    "from 10s to 20s each attempt fails (500) with probability 10%, independently",
			faults: errs(0.1),
		},
		{
			Name: StormErrors50, Title: "50% failures", Length: 10 * time.Second,
			Doc:    "from 10s to 20s each attempt fails (500) with probability 50%, independently",
			faults: errs(0.5),
		},
		{
			Name: StormThrottle, Title: "throttling", Length: 10 * time.Second,
			Doc:    "from 10s to 20s the downstream's quota refuses each attempt with probability 50%, independently, answering 429 Too Many Requests",
			faults: errs(0.5), throttle: true,
		},
	}
}

// StormNames returns the names of the suite's storms.
func StormNames() []string {
	var out []string
	for _, s := range Storms() {
		out = append(out, s.Name)
	}
	return out
}

// pickStorms returns the storms named in names (all of them for none).
func pickStorms(names []string) ([]Storm, error) {
	all := Storms()
	if len(names) == 0 {
		return all, nil
	}
	var out []Storm
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown storm %q (storms: %s)", n, strings.Join(StormNames(), ", "))
		}
		seen[n] = true
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no storm named (storms: %s)", strings.Join(StormNames(), ", "))
	}
	return out, nil
}
