package breaker_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
)

// WithDefaults fills what a Config leaves to defaults, keeps what it sets,
// stays valid, and is its own defaults.
func TestConfigWithDefaults(t *testing.T) {
	for name, c := range map[string]breaker.Config{
		"zero":        {},
		"count":       {Window: breaker.Window{Calls: 20}},
		"time":        {Window: breaker.Window{Duration: 30 * time.Second, SlowCallDuration: time.Second, SlowCallRatio: 0.5}},
		"custom":      {ReadyToTrip: func(c breaker.Counts) bool { return c.Failures > 3 }, Window: breaker.Window{Duration: time.Minute}},
		"no jitter":   {ConsecutiveFailures: 3, OpenTimeout: time.Second, OpenJitter: -1, MaxProbes: 4},
		"max open 0s": {OpenTimeout: 2 * time.Minute},
	} {
		d := c.WithDefaults()
		if err := d.Validate(); err != nil {
			t.Errorf("%s: WithDefaults() is invalid: %v", name, err)
		}
		again := d.WithDefaults()
		if again.Window != d.Window || again.ConsecutiveFailures != d.ConsecutiveFailures ||
			again.OpenTimeout != d.OpenTimeout || again.MaxOpenTimeout != d.MaxOpenTimeout ||
			again.OpenJitter != d.OpenJitter || again.SuccessThreshold != d.SuccessThreshold {
			t.Errorf("%s: WithDefaults twice = %+v, once = %+v", name, again, d)
		}
		if d.OpenTimeout == 0 || d.MaxOpenTimeout < d.OpenTimeout || d.OpenTimeoutMultiplier == 0 || d.MaxProbes == 0 ||
			d.SuccessThreshold == 0 || d.ProbeOffset == 0 || d.ProbeTimeout == 0 || d.IsFailure == nil || d.IsExcluded == nil {
			t.Errorf("%s: a default is missing: %+v", name, d)
		}
	}
	z := breaker.Config{}.WithDefaults()
	if z.ConsecutiveFailures != breaker.DefaultConsecutiveFailures || z.OpenTimeout != breaker.DefaultOpenTimeout ||
		z.OpenJitter != breaker.DefaultOpenJitter || z.MaxProbes != 1 || z.SuccessThreshold != 1 || z.Window != (breaker.Window{}) {
		t.Errorf("zero Config's defaults: %+v", z)
	}
	w := breaker.Config{Window: breaker.Window{Duration: 30 * time.Second}}.WithDefaults().Window
	if w.Buckets != breaker.DefaultBuckets || w.MinCalls != breaker.DefaultMinCalls || w.FailureRatio != breaker.DefaultFailureRatio {
		t.Errorf("time window's defaults: %+v", w)
	}
	if w := (breaker.Config{Window: breaker.Window{Calls: 20}}).WithDefaults().Window; w.MinCalls != 20 || w.Buckets != 0 {
		t.Errorf("count window's defaults: %+v", w)
	}
	if d := (breaker.Config{OpenJitter: -1, MaxProbes: 4}).WithDefaults(); d.OpenJitter != -1 || d.SuccessThreshold != 4 {
		t.Errorf("set fields changed: %+v", d)
	}
}
