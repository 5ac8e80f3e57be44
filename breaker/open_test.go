package breaker

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
)

// openPeriod returns how long the just-opened breaker b stays open, and
// checks it on the clock: open a nanosecond before, half-open at the end.
func openPeriod(t *testing.T, b *Breaker, fc *clocktest.Fake) time.Duration {
	t.Helper()
	wantState(t, b, Open)
	d := b.cur.Load().until.Sub(fc.Now())
	fc.Advance(d - 1)
	wantState(t, b, Open)
	fc.Advance(1)
	wantState(t, b, HalfOpen)
	return d
}

func TestOpenTimeoutGrowth(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []time.Duration
	}{
		{"default: no growth", Config{}, []time.Duration{60 * time.Second, 60 * time.Second, 60 * time.Second}},
		{"doubling to a cap", Config{OpenTimeout: time.Second, MaxOpenTimeout: 10 * time.Second},
			[]time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"tripling", Config{OpenTimeout: time.Second, MaxOpenTimeout: 10 * time.Second, OpenTimeoutMultiplier: 3},
			[]time.Duration{1 * time.Second, 3 * time.Second, 9 * time.Second, 10 * time.Second}},
		{"multiplier one", Config{OpenTimeout: time.Second, MaxOpenTimeout: 10 * time.Second, OpenTimeoutMultiplier: 1},
			[]time.Duration{time.Second, time.Second, time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ConsecutiveFailures = 1
			b, fc := newTest(t, tc.cfg)
			mustCall(t, b, errDown)
			for i, want := range tc.want {
				if got := openPeriod(t, b, fc); got != want {
					t.Fatalf("open period %d = %v, want %v", i+1, got, want)
				}
				mustCall(t, b, errDown) // the probe fails: a repeated trip
			}
			// Closing resets the growth.
			fc.Advance(b.cur.Load().until.Sub(fc.Now()))
			mustCall(t, b, nil)
			wantState(t, b, Closed)
			mustCall(t, b, errDown)
			if got := openPeriod(t, b, fc); got != tc.want[0] {
				t.Fatalf("open period after closing = %v, want %v", got, tc.want[0])
			}
		})
	}
}

// periods trips b n times (failing every probe) and returns the open periods.
func periods(t *testing.T, b *Breaker, fc *clocktest.Fake, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, n)
	mustCall(t, b, errDown)
	for i := range out {
		out[i] = b.cur.Load().until.Sub(fc.Now())
		fc.Advance(out[i])
		mustCall(t, b, errDown)
	}
	return out
}

func TestOpenJitter(t *testing.T) {
	const n = 400
	check := func(t *testing.T, got []time.Duration, lo, hi time.Duration) {
		t.Helper()
		var sum time.Duration
		distinct := map[time.Duration]bool{}
		for i, d := range got {
			if d < lo || d > hi {
				t.Fatalf("period %d = %v, outside [%v, %v]", i, d, lo, hi)
			}
			sum += d
			distinct[d] = true
		}
		if len(distinct) < n/2 {
			t.Fatalf("only %d distinct periods in %d: not jittered", len(distinct), n)
		}
		mean, mid := sum/n, (lo+hi)/2
		if spread := hi - lo; mean < mid-spread/10 || mean > mid+spread/10 {
			t.Fatalf("mean period %v, want about %v (uniform)", mean, mid)
		}
	}
	t.Run("half", func(t *testing.T) {
		cfg := Config{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second, OpenJitter: 0.5, Rand: rand.NewPCG(1, 2)}
		b, fc := newTest(t, cfg)
		check(t, periods(t, b, fc, n), 5*time.Second, 10*time.Second)
	})
	t.Run("default", func(t *testing.T) {
		fc := clocktest.NewFake()
		b := New(Config{ConsecutiveFailures: 1, Clock: fc, Rand: rand.NewPCG(3, 4)})
		check(t, periods(t, b, fc, n), 54*time.Second, 60*time.Second)
	})
	t.Run("with growth", func(t *testing.T) {
		cfg := Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxOpenTimeout: 4 * time.Second, OpenJitter: 0.25, Rand: rand.NewPCG(5, 6)}
		b, fc := newTest(t, cfg)
		got := periods(t, b, fc, n)
		for i, hi := range []time.Duration{time.Second, 2 * time.Second} {
			if lo := hi * 3 / 4; got[i] < lo || got[i] > hi {
				t.Fatalf("period %d = %v, outside [%v, %v]", i, got[i], lo, hi)
			}
		}
		check(t, got[2:], 3*time.Second, 4*time.Second)
	})
	t.Run("seeded runs repeat", func(t *testing.T) {
		run := func() []time.Duration {
			cfg := Config{ConsecutiveFailures: 1, OpenJitter: 1, Rand: rand.NewPCG(7, 8)}
			b, fc := newTest(t, cfg)
			return periods(t, b, fc, 20)
		}
		a, c := run(), run()
		for i := range a {
			if a[i] != c[i] {
				t.Fatalf("period %d: %v then %v with the same seed", i, a[i], c[i])
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenJitter: -1})
		for i, d := range periods(t, b, fc, 5) {
			if d != DefaultOpenTimeout {
				t.Fatalf("period %d = %v without jitter", i, d)
			}
		}
	})
}
