package keyed_test

import (
	"context"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
)

// threadCPU returns the CPU time of the calling OS thread (user and
// system): unlike wall time, it does not count the time the thread waits
// while other processes run, so ratios hold on a loaded machine.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLoop runs f b.N times on one locked OS thread and reports its CPU
// time per call as cpu-ns/op.
func cpuLoop(b *testing.B, f func(i int)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	c0, i := threadCPU(), 0
	for b.Loop() {
		f(i)
		i++
	}
	b.ReportMetric(float64(threadCPU()-c0)/float64(i), "cpu-ns/op")
}

// BenchmarkBreakerCPU is BenchmarkBreaker measured in the thread's CPU
// time (cpu-ns/op): the keyed lookup's cost is keyed (BreakerFor, the
// key hashed beforehand by WithKey, not counted) or keyed-Get (by
// string) minus unkeyed.
func BenchmarkBreakerCPU(b *testing.B) {
	br := breaker.New(breaker.Config{})
	bs, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
	key := "https://api.example.com:443"
	ctx := keyed.WithKey(context.Background(), key)
	bs.BreakerFor(ctx)
	b.Run("unkeyed", func(b *testing.B) {
		cpuLoop(b, func(int) { done, _ := br.Allow(); done(nil) })
	})
	b.Run("keyed", func(b *testing.B) {
		cpuLoop(b, func(int) { done, _ := bs.BreakerFor(ctx).Allow(); done(nil) })
	})
	b.Run("keyed-Get", func(b *testing.B) {
		cpuLoop(b, func(int) { done, _ := bs.Get(key).Allow(); done(nil) })
	})
}

// BenchmarkChurnCPU is BenchmarkChurn in the thread's CPU time: one
// eviction per Get at MaxKeys 1,000 and 100,000.
func BenchmarkChurnCPU(b *testing.B) {
	for _, max := range []int{1000, 100_000} {
		b.Run(strconv.Itoa(max)+"max", func(b *testing.B) {
			g, _ := keyed.New(keyed.Config{MaxKeys: max}, func(k string) *member { return &member{key: k} }, nil)
			keys := make([]string, 2*max)
			for i := range keys {
				keys[i] = "host-" + strconv.Itoa(i)
			}
			for i := range max {
				g.Get("fill-" + strconv.Itoa(i))
			}
			before := g.Stats().Evictions
			n := 0
			cpuLoop(b, func(i int) { g.Get(keys[i%len(keys)]); n++ })
			b.ReportMetric(float64(g.Stats().Evictions-before)/float64(n), "evictions/op")
		})
	}
}
