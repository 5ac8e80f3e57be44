package admission_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
)

const maxDur = time.Duration(math.MaxInt64)

// extreme is one value of one numeric field: refused naming field, or
// (field "") accepted.
type extreme struct {
	name  string
	err   error
	field string
}

func checkExtremes(t *testing.T, cases []extreme) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.field == "" {
				if tc.err != nil {
					t.Fatalf("refused: %v", tc.err)
				}
				return
			}
			if tc.err == nil {
				t.Fatalf("accepted; want %s refused", tc.field)
			}
			if !errors.Is(tc.err, admission.ErrInvalidConfig) || !strings.HasPrefix(tc.err.Error(), "admission: ") || !strings.Contains(tc.err.Error(), tc.field+" is ") {
				t.Fatalf("error %q: want ErrInvalidConfig naming %s, its value and the reason", tc.err, tc.field)
			}
		})
	}
}

// TestAlgorithmConfigExtremes (issue 38, bad input): every numeric field
// of each algorithm's config, at NaN, ±Inf, negative, 0 (the default)
// and the largest values. NaN, infinities and negatives are refused
// naming the field (where negative is not a documented "never"); huge
// limits beyond MaxMaxLimit are refused whichever field asks for them;
// what is accepted runs with extreme RTTs and keeps its bounds.
func TestAlgorithmConfigExtremes(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	g := func(c admission.Gradient2Config) error { return c.Validate() }
	v := func(c admission.VegasConfig) error { return c.Validate() }
	a := func(c admission.AIMDConfig) error { return c.Validate() }
	type G = admission.Gradient2Config
	type V = admission.VegasConfig
	type A = admission.AIMDConfig
	checkExtremes(t, []extreme{
		{name: "G InitialLimit -1", err: g(G{InitialLimit: -1}), field: "Gradient2Config.InitialLimit"},
		{name: "G InitialLimit huge", err: g(G{InitialLimit: math.MaxInt}), field: "Gradient2Config.InitialLimit"},
		{name: "G MinLimit huge", err: g(G{MinLimit: math.MaxInt}), field: "Gradient2Config.MinLimit"},
		{name: "G MaxLimit huge", err: g(G{MaxLimit: math.MaxInt}), field: "Gradient2Config.MaxLimit"},
		{name: "G MaxMaxLimit", err: g(G{InitialLimit: admission.MaxMaxLimit, MinLimit: admission.MaxMaxLimit})},
		{name: "G Smoothing NaN", err: g(G{Smoothing: nan}), field: "Gradient2Config.Smoothing"},
		{name: "G Smoothing Inf", err: g(G{Smoothing: inf}), field: "Gradient2Config.Smoothing"},
		{name: "G Smoothing -Inf", err: g(G{Smoothing: -inf}), field: "Gradient2Config.Smoothing"},
		{name: "G Smoothing negative", err: g(G{Smoothing: -0.1}), field: "Gradient2Config.Smoothing"},
		{name: "G Smoothing tiny", err: g(G{Smoothing: math.SmallestNonzeroFloat64})},
		{name: "G Tolerance Inf", err: g(G{Tolerance: inf}), field: "Gradient2Config.Tolerance"},
		{name: "G Tolerance -Inf", err: g(G{Tolerance: -inf}), field: "Gradient2Config.Tolerance"},
		{name: "G Tolerance negative", err: g(G{Tolerance: -1}), field: "Gradient2Config.Tolerance"},
		{name: "G Tolerance huge", err: g(G{Tolerance: math.MaxFloat64})},
		{name: "G LongWindow -1", err: g(G{LongWindow: -1}), field: "Gradient2Config.LongWindow"},
		{name: "G ShortWindow -1", err: g(G{ShortWindow: -1}), field: "Gradient2Config.ShortWindow"},
		{name: "G ShortWindow above LongWindow", err: g(G{ShortWindow: 20, LongWindow: 10}), field: "Gradient2Config.ShortWindow"},
		{name: "G windows huge", err: g(G{ShortWindow: math.MaxInt, LongWindow: math.MaxInt})},
		{name: "V InitialLimit huge", err: v(V{InitialLimit: math.MaxInt}), field: "VegasConfig.InitialLimit"},
		{name: "V MinLimit huge", err: v(V{MinLimit: admission.MaxMaxLimit + 1}), field: "VegasConfig.MinLimit"},
		{name: "V Smoothing NaN", err: v(V{Smoothing: nan}), field: "VegasConfig.Smoothing"},
		{name: "V Smoothing Inf", err: v(V{Smoothing: inf}), field: "VegasConfig.Smoothing"},
		{name: "V Smoothing negative", err: v(V{Smoothing: -1}), field: "VegasConfig.Smoothing"},
		{name: "V ProbeMultiplier never", err: v(V{ProbeMultiplier: -1})},
		{name: "V ProbeMultiplier huge", err: v(V{ProbeMultiplier: math.MaxInt})},
		{name: "A InitialLimit huge", err: a(A{InitialLimit: math.MaxInt}), field: "AIMDConfig.InitialLimit"},
		{name: "A BackoffRatio Inf", err: a(A{BackoffRatio: inf}), field: "AIMDConfig.BackoffRatio"},
		{name: "A BackoffRatio -Inf", err: a(A{BackoffRatio: -inf}), field: "AIMDConfig.BackoffRatio"},
		{name: "A BackoffRatio negative", err: a(A{BackoffRatio: -0.5}), field: "AIMDConfig.BackoffRatio"},
		{name: "A BackoffRatio tiny", err: a(A{BackoffRatio: math.SmallestNonzeroFloat64})},
		{name: "A Timeout negative", err: a(A{Timeout: -1}), field: "AIMDConfig.Timeout"},
		{name: "A Timeout max", err: a(A{Timeout: maxDur})},
		{name: "Fixed huge", err: admission.Fixed{N: admission.MaxMaxLimit + 1}.Validate(), field: "Fixed.N"},
		{name: "Fixed MaxMaxLimit", err: admission.Fixed{N: admission.MaxMaxLimit}.Validate()},
	})

	// What is accepted runs: extreme RTTs keep the limit in its bounds.
	mk := func(l admission.Limit, err error) admission.Limit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for name, l := range map[string]admission.Limit{
		"G max limits":   mk(admission.NewGradient2(G{InitialLimit: admission.MaxMaxLimit, MinLimit: 1, MaxLimit: admission.MaxMaxLimit})),
		"G huge windows": mk(admission.NewGradient2(G{ShortWindow: math.MaxInt, LongWindow: math.MaxInt, Tolerance: math.MaxFloat64})),
		"G tiny smooth":  mk(admission.NewGradient2(G{Smoothing: math.SmallestNonzeroFloat64})),
		"V huge probe":   mk(admission.NewVegas(V{ProbeMultiplier: math.MaxInt, MaxLimit: admission.MaxMaxLimit})),
		"A max timeout":  mk(admission.NewAIMD(A{Timeout: maxDur, BackoffRatio: math.SmallestNonzeroFloat64})),
	} {
		t.Run("run "+name, func(t *testing.T) {
			at := t0
			for i, rtt := range []time.Duration{1, maxDur, time.Millisecond, maxDur / 2, 1, time.Second} {
				l.OnSample(at, rtt, l.Limit(), i%2 == 1)
				if got := l.Limit(); got < 1 || got > admission.MaxMaxLimit {
					t.Fatalf("after an RTT of %v: limit %d, want within [1, %d]", rtt, got, admission.MaxMaxLimit)
				}
			}
		})
	}
}

// TestLimiterConfigExtremes (issue 38, bad input): every numeric field of
// Config, likewise. 0 is the default (the Go API's documented decision);
// a negative ProbeInterval, ProbeJitter or QueueLength is the documented
// "never"/"none"; other negatives, NaN and +Inf are refused naming the
// field, as are a target above the interval and a window too long to
// scale by 10. What is accepted admits and releases on a fake clock that
// jumps by huge steps.
func TestLimiterConfigExtremes(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	type C = admission.Config
	cases := []struct {
		name  string
		c     C
		field string
	}{
		{"Window negative", C{Window: -1}, "Config.Window"},
		{"Window max", C{Window: maxDur}, "Config.Window"},
		{"Window largest", C{Window: maxDur / 10}, ""},
		{"WindowSamples negative", C{WindowSamples: -1}, "Config.WindowSamples"},
		{"WindowSamples huge", C{WindowSamples: math.MaxInt}, ""},
		{"ProbeInterval never", C{ProbeInterval: -1}, ""},
		{"ProbeInterval max", C{ProbeInterval: maxDur, ProbeJitter: 1}, ""},
		{"ProbeInterval tiny", C{ProbeInterval: 1}, ""},
		{"ProbeJitter NaN", C{ProbeJitter: nan}, "Config.ProbeJitter"},
		{"ProbeJitter Inf", C{ProbeJitter: inf}, "Config.ProbeJitter"},
		{"ProbeJitter above 1", C{ProbeJitter: 1.01}, "Config.ProbeJitter"},
		{"ProbeJitter -Inf", C{ProbeJitter: -inf}, ""},
		{"ProbeLimit negative", C{ProbeLimit: -1}, "Config.ProbeLimit"},
		{"ProbeLimit huge", C{ProbeLimit: math.MaxInt, ProbeInterval: 1}, ""},
		{"QueueLength none", C{QueueLength: -1}, ""},
		{"QueueLength huge", C{QueueLength: math.MaxInt}, ""},
		{"QueueTarget negative", C{QueueTarget: -1}, "Config.QueueTarget"},
		{"QueueTarget max", C{QueueTarget: maxDur}, "Config.QueueTarget"},
		{"QueueTarget above interval", C{QueueTarget: 2 * time.Millisecond, QueueInterval: time.Millisecond}, "Config.QueueTarget"},
		{"QueueTarget and interval max", C{QueueTarget: maxDur, QueueInterval: maxDur}, ""},
		{"QueueInterval negative", C{QueueInterval: -1}, "Config.QueueInterval"},
		{"QueueInterval max", C{QueueInterval: maxDur}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.field != "" {
				if err == nil || !errors.Is(err, admission.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field+" is ") {
					t.Fatalf("Validate: %v; want ErrInvalidConfig naming %s", err, tc.field)
				}
				if _, nerr := admission.New(tc.c); nerr == nil {
					t.Fatal("New accepted it")
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			f := clocktest.NewFake()
			tc.c.Clock = f
			l := newLimiter(t, tc.c)
			for _, step := range []time.Duration{time.Millisecond, time.Hour, maxDur / 4, time.Second} {
				ps := []admission.Permit{mustAcquire(t, l), mustAcquire(t, l)}
				f.Advance(step)
				for _, p := range ps {
					p.Release()
				}
				if n := l.Limit(); n < 1 || l.InFlight() != 0 {
					t.Fatalf("after a step of %v: limit %d, in flight %d", step, n, l.InFlight())
				}
			}
		})
	}
}

// TestGradient2QueueSizePanicLeavesLimiterConsistent: QueueSize is a user
// callback, called as a window closes. Its panic goes on to the Release
// that closed the window; the slot is given back, the limit stays as it
// was, and the next windows are heard once it stops panicking.
func TestGradient2QueueSizePanicLeavesLimiterConsistent(t *testing.T) {
	armed := true
	g, err := admission.NewGradient2(admission.Gradient2Config{InitialLimit: 10, MinLimit: 2, MaxLimit: 100, QueueSize: func(limit float64) float64 {
		if armed {
			panic("queue size bug")
		}
		return 4
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: g, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
	hold := func() []admission.Permit {
		ps := make([]admission.Permit, 0, l.Limit())
		for range l.Limit() {
			ps = append(ps, mustAcquire(t, l))
		}
		f.Advance(10 * time.Millisecond)
		return ps
	}
	ps := hold()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("QueueSize's panic did not go on")
			}
		}()
		ps[9].Release() // 10 in flight when it started: the window closes and QueueSize is asked
	}()
	if l.Limit() != 10 || l.InFlight() != 9 {
		t.Fatalf("after the panic: limit %d, in flight %d; want 10 and 9 (the panicking Release gave its slot back)", l.Limit(), l.InFlight())
	}
	armed = false
	for _, p := range ps[:9] {
		p.Release()
	}
	for range 5 {
		ps := hold()
		for i := len(ps) - 1; i >= 0; i-- {
			ps[i].Release()
		}
	}
	if l.Limit() <= 10 || l.InFlight() != 0 {
		t.Fatalf("after 5 steady windows: limit %d, in flight %d; want above 10 (windows heard again) and 0", l.Limit(), l.InFlight())
	}
}

// TestLimiterHugeRTTsSaturate (sweep, arithmetic extremes): RTTs near
// math.MaxInt64 (a clock that jumps by centuries) do not overflow the
// window's sum into a negative or wrong mean: each is counted as at most
// maxRTT (about 39 hours), so the algorithm hears a very long RTT.
func TestLimiterHugeRTTsSaturate(t *testing.T) {
	h := &heard{limit: 100}
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: h, Clock: f, ProbeInterval: -1, WindowSamples: 8, Window: maxDur / 20})
	ps := make([]admission.Permit, 8) // one window of 8
	for i := range ps {
		ps[i] = mustAcquire(t, l)
	}
	f.Advance(maxDur / 4)
	for _, p := range ps {
		p.Release()
	}
	got := h.last(t, 1)
	if got.rtt < 24*time.Hour {
		t.Fatalf("8 RTTs of %v: the algorithm heard a mean of %v, want a saturated, very long one", maxDur/4, got.rtt)
	}
}
