package keyed_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
)

// BenchmarkBreaker compares an attempt through one shared breaker with
// the same attempt through the member of the context's key (BreakerFor:
// the key WithKey put in the context and hashed there, once per call
// and outside the loop: the lookup's cost is the difference, without
// WithKey's own — its hash and the context it allocates, which an adapter
// pays once per call). keyed-Get looks the key up by string (hashing it).
func BenchmarkBreaker(b *testing.B) {
	b.Run("unkeyed", func(b *testing.B) {
		br := breaker.New(breaker.Config{})
		b.ReportAllocs()
		for b.Loop() {
			done, _ := br.Allow()
			done(nil)
		}
	})
	b.Run("keyed-Get", func(b *testing.B) {
		bs, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
		key := "https://api.example.com:443"
		bs.Get(key)
		b.ReportAllocs()
		for b.Loop() {
			done, _ := bs.Get(key).Allow()
			done(nil)
		}
	})
	b.Run("keyed", func(b *testing.B) {
		bs, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
		ctx := keyed.WithKey(context.Background(), "https://api.example.com:443")
		bs.BreakerFor(ctx)
		b.ReportAllocs()
		for b.Loop() {
			done, _ := bs.BreakerFor(ctx).Allow()
			done(nil)
		}
	})
}

// BenchmarkGetParallel looks up existing keys from every P, with 1, 10 and
// 10,000 live keys: Get (which hashes the key) and For (the member of a
// context's key, hashed once by WithKey).
func BenchmarkGetParallel(b *testing.B) {
	for _, n := range []int{1, 10, 10_000} {
		g, _ := keyed.New(keyed.Config{MaxKeys: n}, func(k string) *member { return &member{key: k} }, nil)
		keys := make([]string, n)
		ctxs := make([]context.Context, n)
		for i := range keys {
			keys[i] = "https://host-" + strconv.Itoa(i) + ".example.com:443"
			ctxs[i] = keyed.WithKey(context.Background(), keys[i])
			g.Get(keys[i])
		}
		b.Run("Get/"+strconv.Itoa(n)+"keys", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					g.Get(keys[i%n])
					i++
				}
			})
		})
		b.Run("For/"+strconv.Itoa(n)+"keys", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					g.For(ctxs[i%n])
					i++
				}
			})
		})
	}
}

// BenchmarkChurn makes every call a new key in a full group of 1,000 and
// of 100,000 (each Get builds a member and evicts one): the cost per call
// stays flat, O(1) whatever MaxKeys.
func BenchmarkChurn(b *testing.B) {
	for _, max := range []int{1000, 100_000} {
		b.Run(strconv.Itoa(max)+"max", func(b *testing.B) {
			g, _ := keyed.New(keyed.Config{MaxKeys: max}, func(k string) *member { return &member{key: k} }, nil)
			// Twice as many keys as the group holds, in turn: every Get
			// misses (a key comes back only after max others).
			keys := make([]string, 2*max)
			for i := range keys {
				keys[i] = "host-" + strconv.Itoa(i)
			}
			for i := range max {
				g.Get("fill-" + strconv.Itoa(i))
			}
			before := g.Stats().Evictions
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				g.Get(keys[i%len(keys)])
				i++
			}
			b.ReportMetric(float64(g.Stats().Evictions-before)/float64(i), "evictions/op")
		})
	}
}

// TestKeyedLookupAllocatesNothing holds the lookup of an existing key at
// zero allocations, as BenchmarkBreaker/keyed reports.
func TestKeyedLookupAllocatesNothing(t *testing.T) {
	bs, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
	ctx := keyed.WithKey(context.Background(), "https://api.example.com:443")
	bs.BreakerFor(ctx)
	if n := testing.AllocsPerRun(100, func() {
		done, _ := bs.BreakerFor(ctx).Allow()
		done(nil)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
