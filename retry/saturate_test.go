package retry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// TestFitsSaturatesWaitPlusMinAttemptTime: a wait near math.MaxInt64 plus
// MinAttemptTime must not wrap around to a time in the past, which made
// fits accept a 292-year wait under MaxElapsed: 1h, and a wait past the
// caller's deadline (the call slept until the deadline instead of
// stopping with ErrDeadlineTooClose).
func TestFitsSaturatesWaitPlusMinAttemptTime(t *testing.T) {
	huge := time.Duration(math.MaxInt64 - int64(time.Millisecond))
	clk := clocktest.NewFake()
	for _, c := range []struct {
		name     string
		elapsed  time.Duration // Policy.MaxElapsed
		deadline time.Duration // the caller's, from now (0: none)
		want     error
	}{
		{"MaxElapsed", time.Hour, 0, retry.ErrElapsed},
		{"caller deadline", 0, time.Hour, retry.ErrDeadlineTooClose},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(c.deadline))
				defer cancel()
			}
			p := &retry.Policy{Clock: clk, MaxElapsed: c.elapsed, MinAttemptTime: time.Second,
				Backoff: backoff.Constant{Interval: huge}}
			call := retry.NewCall(ctx, p)
			a, err := call.Begin()
			if err != nil {
				t.Fatal(err)
			}
			d, err := call.Next(call.End(&a, errFlaky))
			if !errors.Is(err, c.want) {
				t.Fatalf("Next = %v, %v; want %v (the wait plus MinAttemptTime does not fit)", d, err, c.want)
			}
		})
	}
}
