package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestFakeTimeoutCancelsChildrenBeforeAdvanceReturns: on a fake clock the
// children of a clock.WithTimeout context (WithCancel, WithCancelCause, a
// nested WithTimeout on the same clock and their own children) are
// cancelled by the time Advance — or the returned cancel — returns, as a
// real timeout's are before anyone can look; on the start commit they
// were cancelled later, in a goroutine of their own.
func TestFakeTimeoutCancelsChildrenBeforeAdvanceReturns(t *testing.T) {
	for _, how := range []string{"advance", "cancel"} {
		t.Run(how, func(t *testing.T) {
			f := clocktest.NewFake()
			ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second, errMine)
			defer cancel()
			child, cc := context.WithCancel(ctx)
			defer cc()
			causeChild, ccc := context.WithCancelCause(ctx)
			defer ccc(nil)
			nested, nc := clock.WithTimeout(ctx, f, time.Hour, nil)
			defer nc()
			grandchild, gc := context.WithCancel(nested)
			defer gc()
			nestedOfChild, noc := clock.WithTimeout(child, f, time.Hour, nil)
			defer noc()
			want := context.DeadlineExceeded
			if how == "advance" {
				f.Advance(time.Second)
			} else {
				cancel()
				want = context.Canceled
			}
			for _, c := range []struct {
				name string
				ctx  context.Context
			}{
				{"the timeout", ctx},
				{"WithCancel child", child},
				{"WithCancelCause child", causeChild},
				{"nested WithTimeout", nested},
				{"child of the nested WithTimeout", grandchild},
				{"WithTimeout of a child", nestedOfChild},
			} {
				select {
				case <-c.ctx.Done():
				default:
					t.Errorf("%s: not done when %s returned", c.name, how)
				}
				if err := c.ctx.Err(); err != want {
					t.Errorf("%s: Err = %v right after %s, want %v", c.name, err, how, want)
				}
			}
		})
	}
}
