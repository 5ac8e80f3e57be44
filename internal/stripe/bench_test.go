package stripe

import (
	"sync/atomic"
	"testing"
)

// BenchmarkHint measures picking a cell: reading the P's number costs two
// calls into the runtime (procPin, procUnpin), about 2 ns on the test VM.
// (It loops over b.N: a b.Loop loop keeps the calls in its body from being
// inlined, which would measure one more function call.)
func BenchmarkHint(b *testing.B) {
	var s int
	for range b.N {
		s += Hint()
	}
	sink = s
}

var sink int

// BenchmarkAdd compares an increment of one shared atomic.Uint64 with one
// of a Counter, serially and from every P at once: the shared word's cost
// grows with the cores that write it, the Counter's stays flat.
func BenchmarkAdd(b *testing.B) {
	var shared atomic.Uint64
	var striped Counter
	for _, x := range []struct {
		name string
		add  func()
	}{
		{"shared", func() { shared.Add(1) }},
		{"striped", func() { striped.Add(1) }},
	} {
		b.Run(x.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x.add()
			}
		})
		b.Run(x.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					x.add()
				}
			})
		})
	}
}

// BenchmarkLoad measures summing a Counter's cells.
func BenchmarkLoad(b *testing.B) {
	var c Counter
	c.Add(1)
	var s uint64
	for b.Loop() {
		s += c.Load()
	}
	sink = int(s)
}
