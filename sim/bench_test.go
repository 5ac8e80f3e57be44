package sim

import (
	"testing"
	"time"
)

// BenchmarkEngine measures the event loop alone: 10,000 pending events,
// each handler rescheduling itself at a pseudo-random delay (the heap stays
// at its working size). One op is one event.
func BenchmarkEngine(b *testing.B) {
	s := New(1)
	var delays [1024]time.Duration
	for i := range delays {
		delays[i] = time.Duration(s.Rand().Int64N(int64(100 * time.Millisecond)))
	}
	var h HandlerID
	h = s.Register(func(e Event) {
		s.After(delays[(e.Arg)&1023], h, e.Ref, e.Arg+int64(e.Ref))
	})
	for i := 0; i < 10_000; i++ {
		s.Schedule(delays[i&1023], h, int32(i), int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkModel measures the service model end to end (clients, network,
// server, retries with the real backoff and budget): one op is one run of
// 2,000 calls/s for 10s through a server with a 2s loss fault.
func BenchmarkModel(b *testing.B) {
	m := Model{
		Clients: 20, Arrival: Arrival{Kind: Poisson, Rate: 100}, Duration: 10 * time.Second, Drain: 2 * time.Second,
		Tiers: []Tier{{Workers: 40, Queue: 1000, Service: Exp(14 * time.Millisecond),
			Latency: Normal(2*time.Millisecond, 500*time.Microsecond), Timeout: 500 * time.Millisecond}},
		Faults: []Fault{{Kind: FaultLoss, Start: 4 * time.Second, End: 6 * time.Second, Prob: 0.1}},
	}
	p, err := StandardPolicy(PolicyBudget, PolicyParams{Base: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	v := Single(p)
	b.ReportAllocs()
	var events uint64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := Run(&m, v, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkOCC measures one run of the AWS contention model with 100
// clients and full jitter.
func BenchmarkOCC(b *testing.B) {
	m := OCC{Clients: 100, Backoff: occStrategy(PolicyFull)}
	b.ReportAllocs()
	var events uint64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := RunOCC(m, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}
