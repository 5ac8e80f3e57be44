package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// ExampleNewSRE sets an SRE throttler as a Policy's Limiter. While the
// backend answers "overloaded", the throttler rejects a growing share of
// calls locally, before they are sent.
func ExampleNewSRE() {
	users := throttle.NewSRE(throttle.SREConfig{K: 2, Rand: backoff.NewSource(1)}) // one per downstream
	policy := &retry.Policy{MaxAttempts: 1, Limiter: users}

	sent, throttled := 0, 0
	for range 1000 {
		_, err := retry.Do(context.Background(), policy, func(context.Context) (string, error) {
			sent++
			return "", retry.Overloaded(errors.New("503 from the backend"))
		})
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	fmt.Println("sent:", sent, "rejected locally:", throttled, "requests counted:", users.Stats().Requests)
	// Output:
	// sent: 18 rejected locally: 982 requests counted: 1000
}

// ExampleNewAdaptive shows the AWS adaptive rate limiter taking over after
// a throttling answer: from then on each attempt takes a token of a bucket
// refilled at the CUBIC rate.
func ExampleNewAdaptive() {
	clk := clocktest.NewFakeAt(time.Unix(0, 0))
	lim := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	policy := &retry.Policy{MaxAttempts: 1, Limiter: lim, Clock: clk}
	call := func(err error) {
		retry.Do(context.Background(), policy, func(context.Context) (int, error) { return 0, err })
	}
	for range 40 { // 20 calls a second for two seconds
		clk.Advance(50 * time.Millisecond)
		call(nil)
	}
	fmt.Printf("before: in use %v\n", lim.Stats().Enabled)
	call(retry.Overloaded(errors.New("429 Too Many Requests")))
	st := lim.Stats()
	fmt.Printf("after a throttle: in use %v, rate %.1f/s (0.7 × the measured %.1f/s)\n", st.Enabled, st.FillRate, st.MeasuredRate)
	// Output:
	// before: in use false
	// after a throttle: in use true, rate 14.0/s (0.7 × the measured 20.0/s)
}
