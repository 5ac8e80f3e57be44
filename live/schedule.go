package live

import (
	"cmp"
	"slices"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// MaxCalls bounds the calls a scenario's schedule may hold (the clients'
// expected calls, Clients × calls per second × Duration).
const MaxCalls = 1_000_000

// arrival is one call on the schedule: client Client starts its call
// number Seq at At.
type arrival struct {
	At     time.Duration
	Client int32
	Seq    int32
}

// schedule returns every call the clients start, in time order: each
// client's calls before Duration, drawn by sim.Arrival.Stream (periodic
// calls from a random phase in [0, Interval), or Poisson arrivals) as sim
// draws them for the first trial of a virtual run with the same seed
// (sim.TrialSeed(seed, 0, 0)). The same seed gives the same schedule, so
// every policy meets the same calls, and so does the virtual run. Each client's calls are bounded by four times their
// expected number plus 16.
func schedule(sc *Scenario, seed uint64) []arrival {
	perClient := sc.callRate() / float64(sc.Clients) * sc.Duration.Seconds()
	limit := int(4*perClient) + 16
	out := make([]arrival, 0, int(perClient*float64(sc.Clients))+sc.Clients)
	for i := range sc.Clients {
		st := sc.Arrival.Stream(sim.TrialSeed(seed, 0, 0), i)
		at := st.First()
		for seq := 1; at < sc.Duration && seq <= limit; seq++ {
			out = append(out, arrival{At: at, Client: int32(i), Seq: int32(seq)})
			at += st.Next()
		}
	}
	slices.SortFunc(out, func(x, y arrival) int {
		if c := cmp.Compare(x.At, y.At); c != 0 {
			return c
		}
		return cmp.Compare(x.Client, y.Client)
	})
	return out
}
