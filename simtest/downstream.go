package simtest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// Downstream models the service a policy's callers call, and the fleet
// calling it. Zero fields take the defaults noted (Resolve fills them
// in: Downstream{}.Resolve() returns them all).
type Downstream struct {
	// Clients is the number of client instances (the fleet). Each has its
	// own budget and breaker, as each process of a real fleet does.
	// 0: 10.
	Clients int `json:"clients"`
	// Rate is the steady request rate in calls per second across the
	// whole fleet (Poisson arrivals, Rate/Clients per instance).
	// 0: 60% of the capacity, rounded to whole calls/s when that is at
	// least one.
	Rate float64 `json:"rate_per_s"`
	// Workers is how many requests the downstream serves at once.
	// 0: from Capacity, else 20.
	Workers int `json:"workers"`
	// Capacity, in requests per second, is the other way to size the
	// downstream: Workers becomes Capacity × the mean service time,
	// rounded up. Set Workers or Capacity, not both.
	Capacity float64 `json:"capacity_per_s,omitempty"`
	// Service is the time one request holds a worker. Zero: uniform in
	// [10ms, 30ms] (mean 20ms).
	Service sim.Dist `json:"-"`
	// Queue is the waiting room in front of the workers; a full queue
	// answers 503 at once. 0: two seconds of work (2 × the capacity);
	// -1: no queue.
	Queue int `json:"queue"`
	// Latency is the one-way network latency of each leg. Zero: 1ms.
	Latency sim.Dist `json:"-"`
	// Timeout is the client's timeout of one attempt, used by policies
	// that set no attempt_timeout of their own. 0: 1s.
	Timeout time.Duration `json:"-"`
	// Degrade makes service slower as the queue grows (sim.Degrade); the
	// zero value never slows down.
	Degrade sim.Degrade `json:"degrade"`
}

// Defaults of a zero Downstream.
const (
	DefaultClients     = 10
	DefaultWorkers     = 20
	DefaultUtilisation = 0.6 // the default Rate, as a share of the capacity
	DefaultTimeout     = time.Second
)

// DefaultService and DefaultLatency are the Service and Latency of a zero
// Downstream.
var (
	DefaultService = sim.Uniform(10*time.Millisecond, 30*time.Millisecond)
	DefaultLatency = sim.Const(time.Millisecond)
)

// ErrDownstream is wrapped by the errors Downstream.Resolve returns.
var ErrDownstream = errors.New("simtest: invalid downstream")

// Resolve returns d with every default filled in, or an error wrapping
// ErrDownstream naming the first setting out of range.
func (d Downstream) Resolve() (Downstream, error) {
	bad := func(format string, args ...any) (Downstream, error) {
		return Downstream{}, fmt.Errorf("%w: "+format, append([]any{ErrDownstream}, args...)...)
	}
	if d.Clients < 0 || d.Clients > 100_000 {
		return bad("clients must be in [1, 100000], got %d", d.Clients)
	}
	if d.Workers < 0 || d.Workers > 1_000_000 {
		return bad("workers must be in [1, 1000000], got %d", d.Workers)
	}
	if !finite(d.Capacity) || d.Capacity < 0 || d.Capacity > 1e6 {
		return bad("capacity must be in (0, 1e6] requests/s, got %g", d.Capacity)
	}
	if !finite(d.Rate) || d.Rate < 0 || d.Rate > 1e6 {
		return bad("rate must be in (0, 1e6] calls/s, got %g", d.Rate)
	}
	if d.Workers > 0 && d.Capacity > 0 {
		return bad("set workers or capacity, not both (capacity = workers / mean service time)")
	}
	if d.Queue < -1 || d.Queue > 10_000_000 {
		return bad("queue must be in [-1, 10000000], got %d", d.Queue)
	}
	if d.Timeout < 0 || d.Timeout > time.Hour {
		return bad("timeout must be in (0, 1h], got %s", d.Timeout)
	}
	if d.Degrade.Knee < 0 || !finite(d.Degrade.Slope) || d.Degrade.Slope < 0 || !finite(d.Degrade.MaxFactor) || d.Degrade.MaxFactor < 0 {
		return bad("degrade settings must not be negative")
	}
	if d.Clients == 0 {
		d.Clients = DefaultClients
	}
	if d.Service == (sim.Dist{}) {
		d.Service = DefaultService
	}
	if d.Latency == (sim.Dist{}) {
		d.Latency = DefaultLatency
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultTimeout
	}
	mean := d.Service.Mean()
	if mean <= 0 {
		return bad("service time %s has a mean of 0: give it a duration", d.Service)
	}
	if mean > time.Minute {
		return bad("service time %s has a mean above 1m", d.Service)
	}
	if d.Capacity > 0 {
		d.Workers = int(math.Ceil(d.Capacity * mean.Seconds()))
		if d.Workers > 1_000_000 {
			return bad("capacity %g with a mean service of %s needs more than 1000000 workers", d.Capacity, mean)
		}
	}
	if d.Workers == 0 {
		d.Workers = DefaultWorkers
	}
	d.Capacity = float64(d.Workers) / mean.Seconds()
	if d.Rate == 0 {
		// Whole calls/s, except below one (a slow service of few
		// workers), where rounding would leave no traffic at all.
		if d.Rate = math.Round(DefaultUtilisation * d.Capacity); d.Rate < 1 {
			d.Rate = DefaultUtilisation * d.Capacity
		}
	}
	if d.Rate/float64(d.Clients) > 1e6 {
		return bad("rate %g over %d clients is more than 1e6 calls/s per client", d.Rate, d.Clients)
	}
	if d.Queue == 0 {
		d.Queue = max(1, int(math.Ceil(2*d.Capacity)))
	}
	return d, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// model returns the sim.Model of the resolved downstream d under storm s.
func (d Downstream) model(s Storm) sim.Model {
	m := sim.Model{
		Clients:  d.Clients,
		Arrival:  sim.Arrival{Kind: sim.Poisson, Rate: d.Rate / float64(d.Clients)},
		Duration: stormDuration,
		Drain:    stormDrain,
		Warmup:   stormWarmup,
		Tiers: []sim.Tier{{
			Name:    "downstream",
			Workers: d.Workers,
			Queue:   d.Queue,
			Service: d.Service,
			Latency: d.Latency,
			Degrade: d.Degrade,
			Timeout: d.Timeout,
		}},
		MaxEvents: d.maxEvents(),
	}
	m.Faults = s.faults(d)
	return m
}

// RunawayFactor bounds the work of one storm run: a run that needs more
// than RunawayFactor times the events steady traffic would (about 8 per
// call) is stopped, and the policy fails that storm as a runaway. No
// policy with a backoff or an attempt limit comes near it; retries in a
// tight loop without a count limit reach it within seconds.
const RunawayFactor = 20

// maxEvents is the event cap of one run of d.
func (d Downstream) maxEvents() uint64 {
	steady := d.Rate * (stormDuration + stormDrain).Seconds() * 8
	return uint64(max(1e5, RunawayFactor*steady))
}
