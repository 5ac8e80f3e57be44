package redisstore

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
)

// TestHugeWindowKeyTTLCheckSaturates (third outside review): a window
// near the longest duration, whose buckets rounded up to whole
// milliseconds would multiply past math.MaxInt64, is still longer than
// any KeyTTL: Validate refuses it, as it did before the rounding.
func TestHugeWindowKeyTTLCheckSaturates(t *testing.T) {
	bc := breaker.Config{Window: breaker.Window{Duration: math.MaxInt64, Buckets: 3, FailureRatio: 0.5, MinCalls: 1}}
	if err := bc.Validate(); err != nil {
		t.Fatalf("breaker refuses the window: %v", err)
	}
	err := (BreakerConfig{Client: newClient(t, "127.0.0.1:1"), Name: "w", Breaker: bc}).Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a window of %v over 3 buckets with KeyTTL %v: Validate = %v, want the KeyTTL refusal", time.Duration(math.MaxInt64), DefaultKeyTTL, err)
	}
}
