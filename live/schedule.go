package live

import (
	"cmp"
	"math"
	"math/rand/v2"
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

// clientStream returns client i's arrival stream, derived from the seed
// as sim derives its clients' streams.
func clientStream(seed uint64, i int) *rand.PCG {
	return rand.NewPCG(seed, uint64(i)*0x9e3779b97f4a7c15+1)
}

// unit returns a uniform float64 in [0, 1).
func unit(src *rand.PCG) float64 { return float64(src.Uint64()>>11) / (1 << 53) }

// schedule returns every call the clients start, in time order: for each
// client, periodic calls from a random phase in [0, Interval), or Poisson
// arrivals, before Duration. The same seed gives the same schedule, so
// every policy meets the same calls. Each client's calls are bounded by
// four times their expected number plus 16.
func schedule(sc *Scenario, seed uint64) []arrival {
	a := sc.Arrival
	perClient := sc.callRate() / float64(sc.Clients) * sc.Duration.Seconds()
	limit := int(4*perClient) + 16
	out := make([]arrival, 0, int(perClient*float64(sc.Clients))+sc.Clients)
	for i := range sc.Clients {
		src := clientStream(seed, i)
		gap := func() time.Duration {
			if a.Kind == sim.Periodic {
				return a.Interval
			}
			return time.Duration(-math.Log1p(-unit(src)) / a.Rate * float64(time.Second))
		}
		var at time.Duration
		if a.Kind == sim.Periodic {
			at = time.Duration(float64(a.Interval) * unit(src))
		} else {
			at = gap()
		}
		for seq := 1; at < sc.Duration && seq <= limit; seq++ {
			out = append(out, arrival{At: at, Client: int32(i), Seq: int32(seq)})
			at += gap()
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
