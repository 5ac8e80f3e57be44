package config

import (
	"testing"
	"time"
)

// TestFmtDurationDropsOnlyZeroUnits: messages write 10s as 10s (the
// trimming of 24h0m0s to 24h once made it "1") and 5m0s as 5m.
func TestFmtDurationDropsOnlyZeroUnits(t *testing.T) {
	for d, want := range map[string]string{"10s": "10s", "5m": "5m", "24h": "24h", "1h30m": "1h30m", "90s": "1m30s", "100ms": "100ms", "20s": "20s"} {
		v, _ := time.ParseDuration(d)
		if got := fmtDuration(v); got != want {
			t.Errorf("fmtDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
