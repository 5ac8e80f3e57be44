package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// openShared returns a shared Breaker that has tripped, open for a minute,
// on the real clock.
func openShared(tb testing.TB) *Breaker {
	tb.Helper()
	srv := sharedRedis(tb)
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(tb, srv.addr), Name: "refusal", Namespace: namespace(tb),
		Breaker: breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1},
		Timeout: 2 * time.Second, RefreshInterval: time.Hour,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	if err := b.Sync(context.Background()); err != nil {
		tb.Fatal(err)
	}
	_ = call(b, errDown)
	if err := b.Sync(context.Background()); err != nil {
		tb.Fatal(err)
	}
	if b.State() != breaker.Open {
		tb.Fatalf("state %v, want open", b.State())
	}
	return b
}

// TestSharedOpenRefusalAllocatesNothing (issue #37): a call the open
// shared Breaker refuses costs no allocation with no Observer, as with
// breaker.Breaker (retry.PrebuiltRefusal), and its error is still a
// *retry.Error matching breaker.ErrOpen.
func TestSharedOpenRefusalAllocatesNothing(t *testing.T) {
	b := openShared(t)
	p := &retry.Policy{Breaker: b}
	ctx := context.Background()
	op := func(context.Context) (int, error) { return 0, nil }
	_, err := retry.Do(ctx, p, op)
	var re *retry.Error
	if !errors.Is(err, breaker.ErrOpen) || !errors.As(err, &re) || re.Attempts != 0 || re.Reason != breaker.ErrOpen {
		t.Fatalf("refused call: %v (%#v)", err, re)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = retry.Do(ctx, p, op) }); n != 0 {
		t.Fatalf("a refused call allocates %v times", n)
	}
	if b.RefusalError(errDown) != nil || (*Breaker)(nil).RefusalError(breaker.ErrOpen) != nil {
		t.Fatal("RefusalError for another error, or on a nil Breaker")
	}
	if b.RefusalError(breaker.ErrTooManyProbes).Reason != breaker.ErrTooManyProbes {
		t.Fatal("RefusalError(ErrTooManyProbes)")
	}
}

// BenchmarkRefusedOpen measures retry.Do of a call refused by an open
// breaker, serial and parallel: breaker.Breaker against the shared
// Breaker (0 allocs each; on the real clock neither reads the clock).
func BenchmarkRefusedOpen(b *testing.B) {
	local := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1})
	b.Cleanup(local.Close)
	_ = call(local, errDown)
	shared := openShared(b)
	op := func(context.Context) (int, error) { return 0, nil }
	for _, x := range []struct {
		name string
		br   retry.Breaker
	}{{"local", local}, {"redis", shared}} {
		b.Run(x.name, func(b *testing.B) {
			p := &retry.Policy{Breaker: x.br}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := retry.Do(ctx, p, op); err == nil {
					b.Fatal("admitted")
				}
			}
		})
		b.Run(x.name+"-parallel", func(b *testing.B) {
			p := &retry.Policy{Breaker: x.br}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := retry.Do(ctx, p, op); err == nil {
						b.Error("admitted")
						return
					}
				}
			})
		})
	}
}
