package breaker

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	trip := func(Counts) bool { return false }
	cases := []struct {
		cfg  Config
		want string // "" for a valid config
	}{
		{Config{}, ""},
		{Config{ConsecutiveFailures: 3}, ""},
		{Config{Window: Window{Calls: 100, MinCalls: 10, FailureRatio: 0.5}}, ""},
		{Config{Window: Window{Duration: time.Minute, Buckets: 60, FailureRatio: 0.3, SlowCallDuration: time.Second, SlowCallRatio: 0.8}}, ""},
		{Config{Window: Window{Calls: 10}, ReadyToTrip: trip}, ""},
		{Config{ReadyToTrip: trip}, ""},
		{Config{OpenTimeout: time.Second, MaxOpenTimeout: time.Minute, OpenTimeoutMultiplier: 1.5, OpenJitter: 1}, ""},
		{Config{Probe: func(context.Context) error { return nil }, ProbeOffset: time.Second, ProbeTimeout: time.Second}, ""},

		{Config{ConsecutiveFailures: -1}, "ConsecutiveFailures"},
		{Config{ConsecutiveFailures: math.MaxInt32 + 1}, "ConsecutiveFailures"},
		{Config{OpenTimeout: -1}, "OpenTimeout must not"},
		{Config{MaxOpenTimeout: -1}, "MaxOpenTimeout must not be negative"},
		{Config{MaxOpenTimeout: time.Second}, "MaxOpenTimeout must not be shorter"},
		{Config{OpenTimeoutMultiplier: 0.5}, "OpenTimeoutMultiplier"},
		{Config{OpenTimeoutMultiplier: math.NaN()}, "OpenTimeoutMultiplier"},
		{Config{OpenJitter: 1.5}, "OpenJitter"},
		{Config{OpenJitter: math.NaN()}, "OpenJitter"},
		{Config{MaxProbes: -1}, "MaxProbes"},
		{Config{SuccessThreshold: -1}, "SuccessThreshold"},
		{Config{ProbeOffset: -1}, "ProbeOffset"},
		{Config{ProbeTimeout: -1}, "ProbeTimeout"},
		{Config{Window: Window{Calls: -1}}, "Window.Calls"},
		{Config{Window: Window{Calls: 1 << 25}}, "Window.Calls"},
		{Config{Window: Window{Duration: -1}}, "Window.Duration must not"},
		{Config{Window: Window{Duration: time.Minute, Buckets: -1}}, "Window.Buckets"},
		{Config{Window: Window{Duration: time.Minute, Buckets: 5000}}, "Window.Buckets"},
		{Config{Window: Window{Duration: time.Minute, MinCalls: -1}}, "Window.MinCalls must not"},
		{Config{Window: Window{Calls: 10, MinCalls: 11}}, "Window.MinCalls must not exceed"},
		{Config{Window: Window{Calls: 10, SlowCallDuration: -1}}, "SlowCallDuration"},
		{Config{Window: Window{Calls: 10, FailureRatio: 1.01}}, "FailureRatio"},
		{Config{Window: Window{Calls: 10, FailureRatio: math.NaN()}}, "FailureRatio"},
		{Config{Window: Window{Calls: 10, SlowCallRatio: -1}}, "SlowCallRatio is -1, want a fraction from 0 to 1"},
		{Config{Window: Window{Calls: 10, SlowCallRatio: 0.5}}, "needs Window.SlowCallDuration"},
		{Config{Window: Window{Calls: 10, Duration: time.Minute}}, "not both"},
		{Config{Window: Window{FailureRatio: 0.5}}, "needs Calls or Duration"},
		{Config{Window: Window{Duration: 5, Buckets: 10}}, "nanosecond per bucket"},
		{Config{ConsecutiveFailures: 3, Window: Window{Calls: 10}}, "ConsecutiveFailures or Window"},
		{Config{ConsecutiveFailures: 3, ReadyToTrip: trip}, "ConsecutiveFailures or ReadyToTrip"},
		{Config{Window: Window{Calls: 10, FailureRatio: 0.5}, ReadyToTrip: trip}, "ReadyToTrip or Window rates"},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tc.cfg.Window, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "breaker: ")):
			t.Errorf("Validate(%+v) = %v, want an error about %q", tc.cfg.Window, err, tc.want)
		}
		if tc.want != "" {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("New accepted a config Validate rejects (%q)", tc.want)
					}
				}()
				New(tc.cfg)
			}()
		}
	}
}

func TestClosedStateAllocations(t *testing.T) {
	ctx := context.Background()
	op := func(context.Context) (int, error) { return 1, nil }
	for _, bc := range benchConfigs {
		if raceEnabled && bc.cfg.Window.SlowCallDuration > 0 {
			continue // timed calls use pooled records, which -race drops
		}
		// A call timed for SlowCallDuration gets a done function of its
		// own (so that a second call of it is told apart): one allocation.
		per := 0.0
		if bc.cfg.Window.SlowCallDuration > 0 {
			per = 1
		}
		b, fc := newTest(t, bc.cfg)
		if n := testing.AllocsPerRun(1000, func() {
			done, _ := b.Allow()
			done(nil)
		}); n != per {
			t.Errorf("%s: Allow+done allocates %v times per call, want %v", bc.name, n, per)
		}
		if n := testing.AllocsPerRun(1000, func() {
			done, _ := b.Allow()
			fc.Advance(time.Millisecond)
			done(errDown)
			done(errDown) // ignored or counted, without allocating
			for range 4 { // keep the failure rate below every trip condition
				done, _ := b.Allow()
				done(nil)
			}
		}); n != 5*per {
			t.Errorf("%s: a failed call and four successes allocate %v times, want %v", bc.name, n, 5*per)
		}
		wantState(t, b, Closed)
		if n := testing.AllocsPerRun(1000, func() { _, _ = Do(ctx, b, op) }); n != per {
			t.Errorf("%s: Do allocates %v times per call, want %v", bc.name, n, per)
		}
	}
	b, _ := newTest(t, Config{ConsecutiveFailures: 1})
	openNow(t, b)
	if n := testing.AllocsPerRun(1000, func() { _, _ = b.Allow(); _ = b.Ready() }); n != 0 {
		t.Errorf("an open breaker allocates %v times per refusal", n)
	}
}
