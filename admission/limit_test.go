package admission_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// algorithms returns a fresh instance of each algorithm, bounded by
// [lo, hi] and starting at initial.
func algorithms(t *testing.T, initial, lo, hi int) map[string]admission.Limit {
	t.Helper()
	g, err := admission.NewGradient2(admission.Gradient2Config{InitialLimit: initial, MinLimit: lo, MaxLimit: hi})
	if err != nil {
		t.Fatal(err)
	}
	v, err := admission.NewVegas(admission.VegasConfig{InitialLimit: initial, MinLimit: lo, MaxLimit: hi, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: initial, MinLimit: lo, MaxLimit: hi})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]admission.Limit{"Gradient2": g, "Vegas": v, "AIMD": a}
}

// feeder feeds samples one after the other on a virtual time line, each
// with the limit in flight (a saturated server).
type feeder struct {
	l   admission.Limit
	now time.Time
}

func (f *feeder) feed(n int, rtt time.Duration, dropped bool) {
	for range n {
		f.l.OnSample(f.now, rtt, f.l.Limit(), dropped)
		f.now = f.now.Add(rtt)
	}
}

func TestLimitGrowsUnderConstantRTT(t *testing.T) {
	for name, l := range algorithms(t, 20, 4, 200) {
		t.Run(name, func(t *testing.T) {
			f := &feeder{l: l, now: t0}
			f.feed(200, 10*time.Millisecond, false)
			if got := l.Limit(); got <= 20 {
				t.Fatalf("limit %d after 200 samples at a steady RTT, want above the initial 20", got)
			}
		})
	}
}

func TestLimitShrinksWhenRTTRises(t *testing.T) {
	for _, name := range []string{"Gradient2", "Vegas"} {
		t.Run(name, func(t *testing.T) {
			l := algorithms(t, 100, 4, 200)[name]
			f := &feeder{l: l, now: t0}
			f.feed(50, 10*time.Millisecond, false)
			before := l.Limit()
			f.feed(50, 40*time.Millisecond, false)
			if got := l.Limit(); got >= before {
				t.Fatalf("limit %d after the RTT went from 10ms to 40ms, was %d: want smaller", got, before)
			}
		})
	}
}

func TestAIMDHalvesOnDrop(t *testing.T) {
	l := algorithms(t, 100, 4, 200)["AIMD"]
	l.OnSample(t0, 10*time.Millisecond, 100, true)
	if got := l.Limit(); got != 50 {
		t.Fatalf("limit %d after one drop from 100, want 50", got)
	}
	l.OnSample(t0, 6*time.Second, 50, false) // slower than the 5s Timeout
	if got := l.Limit(); got != 25 {
		t.Fatalf("limit %d after a sample slower than Timeout from 50, want 25", got)
	}
}

func TestLimitBoundsHold(t *testing.T) {
	for name, l := range algorithms(t, 10, 5, 30) {
		t.Run(name, func(t *testing.T) {
			f := &feeder{l: l, now: t0}
			for range 3 {
				f.feed(500, 10*time.Millisecond, false)
				if got := l.Limit(); got > 30 {
					t.Fatalf("limit %d above MaxLimit 30", got)
				}
				f.feed(200, 5*time.Second, true)
				if got := l.Limit(); got < 5 {
					t.Fatalf("limit %d below MinLimit 5", got)
				}
			}
			f.feed(500, 10*time.Millisecond, false)
			if got := l.Limit(); got != 30 {
				t.Fatalf("limit %d after a long steady spell, want MaxLimit 30", got)
			}
		})
	}
}

// A clock that steps back: samples with negative RTTs (requests in flight
// across the step), one absurdly short one, then samples whose start is an
// hour before the last. None of it may drive the limit to its minimum.
func TestClockStepBackDoesNotShrinkLimitToMin(t *testing.T) {
	for name, l := range algorithms(t, 50, 4, 200) {
		t.Run(name, func(t *testing.T) {
			f := &feeder{l: l, now: t0}
			f.feed(100, 10*time.Millisecond, false)
			before := l.Limit()
			for range 50 {
				l.OnSample(f.now, -time.Hour, l.Limit(), false)
			}
			if got := l.Limit(); got != before {
				t.Fatalf("limit %d after negative RTTs, was %d: want them ignored", got, before)
			}
			// A request in flight across a step of nearly its RTT.
			l.OnSample(f.now.Add(-time.Millisecond), time.Microsecond, l.Limit(), false)
			f.now = f.now.Add(-time.Hour) // the clock stepped back an hour
			f.feed(300, 10*time.Millisecond, false)
			if got := l.Limit(); got < before/2 || got <= 4 {
				t.Fatalf("limit %d after the clock stepped back, was %d: want it kept", got, before)
			}
		})
	}
}

func TestLimitRefusesBadConfig(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name  string
		err   error
		field string
	}{
		{"negative MinLimit", admission.Gradient2Config{MinLimit: -1}.Validate(), "Gradient2Config.MinLimit"},
		{"negative MaxLimit", admission.VegasConfig{MaxLimit: -5}.Validate(), "VegasConfig.MaxLimit"},
		{"negative InitialLimit", admission.AIMDConfig{InitialLimit: -1}.Validate(), "AIMDConfig.InitialLimit"},
		{"min above max", admission.Gradient2Config{MinLimit: 50, MaxLimit: 10}.Validate(), "Gradient2Config.MinLimit"},
		{"initial outside", admission.Gradient2Config{InitialLimit: 300, MinLimit: 1, MaxLimit: 100}.Validate(), "Gradient2Config.InitialLimit"},
		{"NaN smoothing", admission.Gradient2Config{Smoothing: nan}.Validate(), "Gradient2Config.Smoothing"},
		{"NaN tolerance", admission.Gradient2Config{Tolerance: nan}.Validate(), "Gradient2Config.Tolerance"},
		{"tolerance below 1", admission.Gradient2Config{Tolerance: 0.5}.Validate(), "Gradient2Config.Tolerance"},
		{"NaN backoff", admission.AIMDConfig{BackoffRatio: nan}.Validate(), "AIMDConfig.BackoffRatio"},
		{"backoff 1", admission.AIMDConfig{BackoffRatio: 1}.Validate(), "AIMDConfig.BackoffRatio"},
		{"smoothing above 1", admission.VegasConfig{Smoothing: 2}.Validate(), "VegasConfig.Smoothing"},
		{"fixed 0", admission.Fixed{N: 0}.Validate(), "Fixed.N"},
		{"fixed negative", admission.Fixed{N: -3}.Validate(), "Fixed.N"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("Validate accepted it")
			}
			if !errors.Is(tc.err, admission.ErrInvalidConfig) || !strings.Contains(tc.err.Error(), tc.field+" is ") || !strings.HasPrefix(tc.err.Error(), "admission: ") {
				t.Fatalf("error %q: want ErrInvalidConfig naming %s and its value", tc.err, tc.field)
			}
		})
	}
	for _, err := range []error{admission.Gradient2Config{}.Validate(), admission.VegasConfig{}.Validate(), admission.AIMDConfig{}.Validate(), admission.Fixed{N: 1}.Validate()} {
		if err != nil {
			t.Fatalf("zero config refused: %v", err)
		}
	}
}

func TestLimitZeroConfigDefaults(t *testing.T) {
	g, _ := admission.NewGradient2(admission.Gradient2Config{})
	v, _ := admission.NewVegas(admission.VegasConfig{})
	a, _ := admission.NewAIMD(admission.AIMDConfig{})
	for name, l := range map[string]admission.Limit{"Gradient2": g, "Vegas": v, "AIMD": a} {
		if got := l.Limit(); got != admission.DefaultInitialLimit {
			t.Errorf("%s: zero config starts at %d, want %d", name, got, admission.DefaultInitialLimit)
		}
	}
	// Only MaxLimit set below the default initial: the initial follows it.
	g, err := admission.NewGradient2(admission.Gradient2Config{MaxLimit: 8})
	if err != nil || g.Limit() != 8 {
		t.Fatalf("MaxLimit 8 alone: limit %v, err %v; want 8, nil", g, err)
	}
}
