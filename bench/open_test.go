package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"
	sgbackoff "github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// openLibs builds, for each library, a breaker that one failure has opened
// for an hour, and the call a caller makes through it during the outage:
// stormguard's retry.Do under a policy holding the breaker (the cost of
// every call of a retrying client while its downstream is out; issue #36),
// the same with an Observer that counts refused calls (as a metrics
// Observer does), stormguard's Breaker.Allow alone, gobreaker's Execute and failsafe-go's
// Get. Each call must be refused without running op and return the
// library's open-breaker error; TestOpenBreakerRefuses checks they are.
func openLibs(op func() (int, error)) []struct {
	lib  string
	call func() error
	open error
} {
	ctx := context.Background()
	sg := func() *breaker.Breaker {
		br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
		done, _ := br.Allow()
		done(errTransient)
		return br
	}
	p := &retry.Policy{MaxAttempts: 4, Backoff: sgbackoff.Constant{}, Breaker: sg()}
	po := &retry.Policy{MaxAttempts: 4, Backoff: sgbackoff.Constant{}, Breaker: p.Breaker, Observer: &refusals{}}
	sgOp := func(context.Context) (int, error) { return op() }
	br := sg()
	gb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
		Name:        "bench",
		Timeout:     time.Hour,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	gb.Execute(func() (int, error) { return 0, errTransient })
	fcb := circuitbreaker.NewBuilder[int]().WithFailureThreshold(1).WithDelay(time.Hour).Build()
	fcb.Open()
	fs := failsafe.With[int](fcb)
	return []struct {
		lib  string
		call func() error
		open error
	}{
		{"stormguard", func() error { _, err := retry.Do(ctx, p, sgOp); return err }, breaker.ErrOpen},
		{"stormguard-observed", func() error { _, err := retry.Do(ctx, po, sgOp); return err }, breaker.ErrOpen},
		{"stormguard-breaker", func() error {
			done, err := br.Allow()
			if err == nil {
				done(nil)
			}
			return err
		}, breaker.ErrOpen},
		{"gobreaker", func() error { _, err := gb.Execute(op); return err }, gobreaker.ErrOpenState},
		{"failsafe-go", func() error { _, err := fs.Get(op); return err }, circuitbreaker.ErrOpen},
	}
}

// TestOpenBreakerRefuses checks that BenchmarkBreakerOpen measures the same
// thing for every library: a refusal that does not run the operation.
func TestOpenBreakerRefuses(t *testing.T) {
	calls := 0
	for _, l := range openLibs(func() (int, error) { calls++; return 1, nil }) {
		for range 3 {
			if err := l.call(); !errors.Is(err, l.open) {
				t.Errorf("%s: %v, want its open-breaker error %v", l.lib, err, l.open)
			}
		}
		if calls != 0 {
			t.Errorf("%s ran the operation %d times through an open breaker", l.lib, calls)
		}
	}
}

// BenchmarkBreakerOpen measures a call refused by an open breaker, the cost
// of every call during an outage, serially and with b.RunParallel on every
// core (see openLibs for what each library's call is).
func BenchmarkBreakerOpen(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			for _, l := range openLibs(ok) {
				b.Run("lib="+l.lib, func(b *testing.B) {
					b.ReportAllocs()
					if mode == "serial" {
						for b.Loop() {
							l.call()
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							l.call()
						}
					})
				})
			}
		})
	}
}

// refusals is an Observer that counts the calls a breaker refused.
type refusals struct {
	retry.NopObserver
	n atomic.Int64
}

func (r *refusals) CallEnd(_ context.Context, e retry.CallEnd) {
	if e.Reason == retry.ReasonBreaker {
		r.n.Add(1)
	}
}
