package backoff

import (
	"testing"
	"time"
)

var sink time.Duration

func BenchmarkDelay(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    Strategy
	}{
		{"Constant", Constant{Interval: 100 * ms}},
		{"Linear", Linear{}},
		{"Exponential/none", Exponential{}},
		{"Exponential/full", Exponential{Jitter: Full}},
		{"Exponential/equal", Exponential{Jitter: Equal}},
		{"Exponential/decorrelated", Exponential{Jitter: Decorrelated}},
		{"Exponential/proportional", Exponential{Jitter: Proportional}},
		{"Exponential/full-seeded", Exponential{Jitter: Full, Rand: NewSource(1)}},
		{"Exponential/multiplier1.5", Exponential{Multiplier: 1.5, Jitter: Full}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var prev time.Duration
			for i := 0; b.Loop(); i++ {
				prev = bc.s.Delay(i&15+1, prev)
			}
			sink = prev
		})
	}
}

func BenchmarkDelayParallel(b *testing.B) {
	s := Strategy(Exponential{Jitter: Full})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var d time.Duration
		for i := 0; pb.Next(); i++ {
			d += s.Delay(i&15+1, 0)
		}
		sink = d
	})
}
