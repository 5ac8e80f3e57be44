package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/keyed"
)

// benchBreakers returns a local breaker and a joined Redis-backed one with
// the same configuration, on the real clock.
func benchBreakers(b *testing.B, bc breaker.Config) (*breaker.Breaker, *Breaker) {
	b.Helper()
	srv := sharedRedis(b)
	local := breaker.New(bc)
	b.Cleanup(local.Close)
	shared, err := NewBreaker(BreakerConfig{
		Client: newClient(b, srv.addr), Name: "bench", Namespace: namespace(b), Breaker: bc,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(shared.Close)
	if err := shared.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	return local, shared
}

// BenchmarkAllowClosed measures Allow followed by done(nil) in the closed
// state with the default trip condition (5 consecutive failures): the
// local breaker.Breaker, and the Redis-backed Breaker serving from its
// cached state while its background exchange runs every 250ms. The
// issue's target: redis under 2× local, 0 allocs/op.
func BenchmarkAllowClosed(b *testing.B) { benchAllowClosed(b, breaker.Config{}) }

// BenchmarkAllowClosedWindow is BenchmarkAllowClosed with a time-window
// condition, where the local breaker takes a lock per result and the
// Redis-backed one counts in striped cells.
func BenchmarkAllowClosedWindow(b *testing.B) {
	benchAllowClosed(b, breaker.Config{Window: breaker.Window{Duration: time.Minute, MinCalls: 20, FailureRatio: 0.3}})
}

// BenchmarkAllowClosedTimed is BenchmarkAllowClosedWindow with slow calls
// timed: each done reads the clock.
func BenchmarkAllowClosedTimed(b *testing.B) {
	benchAllowClosed(b, breaker.Config{Window: breaker.Window{Duration: time.Minute, MinCalls: 20, FailureRatio: 0.3,
		SlowCallDuration: time.Second, SlowCallRatio: 0.5}})
}

func benchAllowClosed(b *testing.B, bc breaker.Config) {
	local, shared := benchBreakers(b, bc)
	for _, x := range []struct {
		name string
		br   interface {
			Allow() (func(error), error)
		}
	}{{"local", local}, {"redis", shared}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				done, err := x.br.Allow()
				if err != nil {
					b.Fatal(err)
				}
				done(nil)
			}
		})
		b.Run(x.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					done, err := x.br.Allow()
					if err != nil {
						b.Error(err)
						return
					}
					done(nil)
				}
			})
		})
	}
}

// BenchmarkBudget measures Record(false, nil) plus Withdraw (granted or
// refused) on budget.Ratio and on the Redis-backed Budget.
func BenchmarkBudget(b *testing.B) {
	srv := sharedRedis(b)
	shared, err := NewBudget(BudgetConfig{Client: newClient(b, srv.addr), Name: "bench", Namespace: namespace(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(shared.Close)
	if err := shared.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, x := range []struct {
		name string
		bu   interface {
			Record(bool, error)
			Withdraw(error) bool
		}
	}{{"local", budget.NewRatio(budget.TenPercent())}, {"redis", shared}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					x.bu.Record(false, nil)
					x.bu.Withdraw(errDown)
				}
			})
		})
	}
}

// BenchmarkRefreshMembers measures one refresh of 100 live members of a
// keyed group: each member's own exchange, one after another (as the
// members' loops make them, one round trip each), against SyncAll's one
// pipeline (BatchRefresh).
func BenchmarkRefreshMembers(b *testing.B) {
	srv := sharedRedis(b)
	k, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{
		Client: newClient(b, srv.addr), Name: "hosts", Namespace: namespace(b),
		RefreshInterval: time.Hour, Timeout: 5 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Close)
	var ms []*Breaker
	for i := range 100 {
		m := k.Get(hostKey(i))
		if err := m.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for _, m := range ms {
				if err := m.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("pipelined", func(b *testing.B) {
		for b.Loop() {
			if err := k.SyncAll(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
