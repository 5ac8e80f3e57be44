package redisstore

import (
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
)

// TestLongestOpenPeriodDoesNotWrap: an open period near the longest
// Duration, on a clock that has moved since it was anchored to Redis's,
// ends at a saturated time far ahead rather than wrapping into the past
// (which would end it at once).
func TestLongestOpenPeriodDoesNotWrap(t *testing.T) {
	rc := newReadCounter()
	c := gatedConfig(t, "longest", rc, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: math.MaxInt64 - 1, OpenJitter: -1})
	c.KeyTTL = math.MaxInt64
	for _, gate := range []bool{false, true} {
		c.Name = "longest-" + map[bool]string{false: "plain", true: "gated"}[gate]
		b := newGatedBreaker(t, c, gate)
		rc.Advance(time.Second)
		mustSync(t, b)
		if err := call(b, errDown); err != nil {
			t.Fatal(err)
		}
		mustSync(t, b)
		wantState(t, b, breaker.Open)
		rc.Advance(24 * time.Hour)
		wantState(t, b, breaker.Open)
	}
	if got := scriptMillis(math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("scriptMillis(MaxInt64) = %v", got)
	}
	if got := scriptMillis(math.MinInt64); got != math.MinInt64 {
		t.Fatalf("scriptMillis(MinInt64) = %v", got)
	}
}
