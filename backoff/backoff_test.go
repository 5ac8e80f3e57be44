package backoff

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestExponentialNoJitter(t *testing.T) {
	tests := []struct {
		name string
		e    Exponential
		want []time.Duration // for n = 1, 2, ...
	}{
		{"defaults", Exponential{}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 10 * time.Second, 10 * time.Second}},
		{"base and cap", Exponential{Base: 5 * ms, Max: 30 * ms}, []time.Duration{5 * ms, 10 * ms, 20 * ms, 30 * ms, 30 * ms}},
		{"multiplier 3", Exponential{Base: ms, Max: time.Second, Multiplier: 3}, []time.Duration{ms, 3 * ms, 9 * ms, 27 * ms}},
		{"multiplier 1.5", Exponential{Base: 100 * ms, Max: time.Second, Multiplier: 1.5}, []time.Duration{100 * ms, 150 * ms, 225 * ms}},
		{"multiplier below 1 does not grow", Exponential{Base: 100 * ms, Multiplier: 0.5}, []time.Duration{100 * ms, 100 * ms, 100 * ms}},
		{"max below base raised to base", Exponential{Base: time.Second, Max: ms}, []time.Duration{time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				if got := tt.e.Delay(i+1, 0); got != want {
					t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

func TestLinearAndConstant(t *testing.T) {
	l := Linear{Base: 100 * ms, Step: 50 * ms, Max: 300 * ms}
	for i, want := range []time.Duration{100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms, 300 * ms} {
		if got := l.Delay(i+1, 0); got != want {
			t.Errorf("Linear.Delay(%d) = %v, want %v", i+1, got, want)
		}
	}
	if got := (Linear{}).Delay(3, 0); got != 300*ms {
		t.Errorf("zero Linear.Delay(3) = %v, want 300ms (step defaults to base)", got)
	}
	if got := (Linear{Base: ms, Step: time.Duration(math.MaxInt64)}).Delay(1<<20, 0); got != DefaultMax {
		t.Errorf("huge step = %v, want Max", got)
	}
	c := Constant{Interval: 250 * ms}
	for n := 1; n < 5; n++ {
		if got := c.Delay(n, 0); got != 250*ms {
			t.Errorf("Constant.Delay(%d) = %v", n, got)
		}
	}
	if got := (Constant{}).Delay(1, 0); got != 0 {
		t.Errorf("zero Constant = %v, want 0", got)
	}
	if got := (Constant{Interval: -time.Second}).Delay(1, 0); got != 0 {
		t.Errorf("negative Constant = %v, want 0", got)
	}
}

func TestFuncClampsNegative(t *testing.T) {
	f := Func(func(n int, _ time.Duration) time.Duration { return time.Duration(2-n) * time.Second })
	if f.Delay(1, 0) != time.Second || f.Delay(5, 0) != 0 {
		t.Fatal("Func adapter")
	}
}

func TestOverflowSafety(t *testing.T) {
	huge := []float64{2, 3, 10, 1e9, 1e300, math.MaxFloat64, math.Inf(1), math.NaN()}
	for _, m := range huge {
		for _, j := range []Jitter{None, Full, Equal, Decorrelated, Proportional} {
			e := Exponential{Base: time.Second, Max: time.Hour, Multiplier: m, Jitter: j, Rand: rand.NewPCG(1, 2)}
			for _, n := range []int{-5, 0, 1, 2, 30, 62, 63, 64, 1000, 1 << 20, math.MaxInt} {
				d := e.Delay(n, time.Duration(math.MaxInt64))
				if d < 0 || d > time.Hour {
					t.Fatalf("m=%v jitter=%v n=%d: delay %v out of [0, Max]", m, j, n, d)
				}
			}
		}
	}
}

// draws returns n delays of s for retry k.
func draws(s Strategy, k, n int, prev time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = s.Delay(k, prev)
	}
	return out
}

func TestJitterIntervals(t *testing.T) {
	src := rand.NewPCG(42, 7)
	base, maxD := 10*ms, 2*time.Second
	for _, k := range []int{1, 3, 6, 12} {
		ceil := Exponential{Base: base, Max: maxD}.Delay(k, 0)
		cases := []struct {
			j      Jitter
			lo, hi time.Duration
		}{
			{Full, 0, ceil},
			{Equal, ceil / 2, ceil},
			{Proportional, ceil - time.Duration(0.2*float64(ceil)), min(maxD, ceil+time.Duration(0.2*float64(ceil)))},
		}
		for _, c := range cases {
			e := Exponential{Base: base, Max: maxD, Jitter: c.j, Rand: src}
			for _, d := range draws(e, k, 10000, 0) {
				if d < c.lo || d > c.hi {
					t.Fatalf("%v k=%d: %v outside [%v, %v]", c.j, k, d, c.lo, c.hi)
				}
			}
		}
	}
	// Decorrelated: U[Base, min(Max, 3·prev)].
	e := Exponential{Base: base, Max: maxD, Jitter: Decorrelated, Rand: src}
	prev := time.Duration(0)
	for i := 0; i < 10000; i++ {
		hi := min(maxD, 3*max(prev, base))
		d := e.Delay(i+1, prev)
		if d < base || d > hi {
			t.Fatalf("decorrelated: %v outside [%v, %v] (prev %v)", d, base, hi, prev)
		}
		prev = d
	}
}

// ksUniform returns the Kolmogorov–Smirnov statistic of xs against the
// uniform distribution on [lo, hi].
func ksUniform(xs []time.Duration, lo, hi time.Duration) float64 {
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := float64(len(s))
	var dmax float64
	for i, x := range s {
		f := float64(x-lo) / float64(hi-lo)
		dmax = math.Max(dmax, math.Max(float64(i+1)/n-f, f-float64(i)/n))
	}
	return dmax
}

func TestJitterIsUniform(t *testing.T) {
	// Critical value of the KS statistic at α = 0.001 for n = 10,000 is
	// 1.95/√n ≈ 0.0195; the seed is fixed, so the test is deterministic.
	const n, crit = 10000, 0.0195
	src := rand.NewPCG(2024, 11)
	ceil := 800 * ms
	full := draws(Exponential{Base: 100 * ms, Max: 10 * time.Second, Jitter: Full, Rand: src}, 4, n, 0)
	if d := ksUniform(full, 0, ceil); d > crit {
		t.Errorf("full jitter: KS D = %.4f > %.4f", d, crit)
	}
	equal := draws(Exponential{Base: 100 * ms, Max: 10 * time.Second, Jitter: Equal, Rand: src}, 4, n, 0)
	if d := ksUniform(equal, ceil/2, ceil); d > crit {
		t.Errorf("equal jitter: KS D = %.4f > %.4f", d, crit)
	}
	prop := draws(Exponential{Base: 100 * ms, Max: 10 * time.Second, Jitter: Proportional, Rand: src}, 4, n, 0)
	if d := ksUniform(prop, 640*ms, 960*ms); d > crit {
		t.Errorf("proportional jitter: KS D = %.4f > %.4f", d, crit)
	}
	dec := draws(Exponential{Base: 100 * ms, Max: 10 * time.Second, Jitter: Decorrelated, Rand: src}, 4, n, time.Second)
	if d := ksUniform(dec, 100*ms, 3*time.Second); d > crit {
		t.Errorf("decorrelated jitter: KS D = %.4f > %.4f", d, crit)
	}
	// The global generator is uniform too (not seeded: a loose bound).
	global := draws(Exponential{Base: 100 * ms, Max: 10 * time.Second, Jitter: Full}, 4, n, 0)
	if d := ksUniform(global, 0, ceil); d > 0.03 {
		t.Errorf("full jitter (global source): KS D = %.4f", d)
	}
}

func TestChiSquareFullJitter(t *testing.T) {
	// 20 equal bins, 10,000 draws: χ² with 19 degrees of freedom has a
	// 0.999 quantile of 43.8.
	const n, bins = 10000, 20
	src := rand.NewPCG(99, 1)
	e := Exponential{Base: time.Second, Max: time.Second, Jitter: Full, Rand: src}
	var count [bins]int
	for _, d := range draws(e, 1, n, 0) {
		b := int(float64(d) / float64(time.Second) * bins)
		if b == bins {
			b--
		}
		count[b]++
	}
	exp := float64(n) / bins
	chi := 0.0
	for _, c := range count {
		chi += (float64(c) - exp) * (float64(c) - exp) / exp
	}
	if chi > 43.8 {
		t.Fatalf("χ² = %.1f > 43.8: %v", chi, count)
	}
}

func TestSeededIsReproducible(t *testing.T) {
	a := Exponential{Jitter: Full, Rand: NewSource(5)}
	b := Exponential{Jitter: Full, Rand: NewSource(5)}
	c := Exponential{Jitter: Full, Rand: NewSource(6)}
	same, differ := true, false
	for n := 1; n < 50; n++ {
		x, y, z := a.Delay(n, 0), b.Delay(n, 0), c.Delay(n, 0)
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Fatalf("same seed same=%v, different seed differs=%v", same, differ)
	}
}

func TestConcurrentUse(t *testing.T) {
	shared := Exponential{Jitter: Decorrelated, Rand: NewSource(1)}
	global := Exponential{Jitter: Full}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev time.Duration
			for i := 1; i < 2000; i++ {
				prev = shared.Delay(i, prev)
				if d := global.Delay(i, 0); d < 0 || d > DefaultMax {
					t.Errorf("delay %v", d)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestZeroAllocs(t *testing.T) {
	src := NewSource(1)
	for _, s := range []Strategy{
		Exponential{Jitter: Full}, Exponential{Jitter: Decorrelated, Rand: src},
		Linear{Jitter: Equal}, Constant{Interval: ms, Jitter: Proportional},
	} {
		if a := testing.AllocsPerRun(100, func() { s.Delay(7, ms) }); a != 0 {
			t.Errorf("%T: %v allocs", s, a)
		}
	}
}

func TestJitterNames(t *testing.T) {
	for j := None; j <= Proportional; j++ {
		if p, ok := ParseJitter(j.String()); !ok || p != j {
			t.Errorf("round trip %v", j)
		}
	}
	if _, ok := ParseJitter("fuller"); ok {
		t.Error("ParseJitter accepted garbage")
	}
	if Jitter(9).String() != "jitter(9)" {
		t.Error(Jitter(9).String())
	}
}

func FuzzDelay(f *testing.F) {
	f.Add(int64(ms), int64(time.Second), 2.0, 3, int64(0), uint8(1), 0.2, uint64(1))
	f.Add(int64(1), int64(math.MaxInt64), 1e300, 1<<20, int64(math.MaxInt64), uint8(3), 5.0, uint64(9))
	f.Add(int64(-5), int64(-1), -3.0, -1, int64(-9), uint8(4), -1.0, uint64(0))
	f.Fuzz(func(t *testing.T, base, max int64, m float64, n int, prev int64, j uint8, factor float64, seed uint64) {
		e := Exponential{Base: time.Duration(base), Max: time.Duration(max), Multiplier: m,
			Jitter: Jitter(j % 5), Factor: factor, Rand: rand.NewPCG(seed, seed)}
		b, hi := bounds(e.Base, e.Max, DefaultBase, DefaultMax)
		d := e.Delay(n, time.Duration(prev))
		if d < 0 || d > hi {
			t.Fatalf("%+v Delay(%d, %d) = %v outside [0, %v]", e, n, prev, d, hi)
		}
		if e.Jitter == None && d < b {
			t.Fatalf("no jitter below base: %v < %v", d, b)
		}
		l := Linear{Base: time.Duration(base), Step: time.Duration(prev), Max: time.Duration(max), Jitter: Jitter(j % 5), Factor: factor}
		_, lhi := bounds(l.Base, l.Max, DefaultBase, DefaultMax)
		if d := l.Delay(n, time.Duration(prev)); d < 0 || d > lhi {
			t.Fatalf("linear %+v = %v", l, d)
		}
		c := Constant{Interval: time.Duration(base), Jitter: Jitter(j % 5), Factor: factor}
		if d := c.Delay(n, time.Duration(prev)); d < 0 || (base >= 0 && d > time.Duration(base)) {
			t.Fatalf("constant %+v = %v", c, d)
		}
	})
}

// The default shape (doubling, full jitter, the global generator) has a
// path of its own in Exponential.Delay: its draws stay in [0, T] for T
// the un-jittered delay of the same strategy, at every extreme of Base,
// Max and n, and reach across that range.
func TestFullJitterGlobalPathBounds(t *testing.T) {
	for _, bm := range [][2]time.Duration{
		{0, 0}, {-time.Second, -1}, {1, 1}, {ms, 10 * time.Second},
		{time.Hour, time.Second}, {1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64},
	} {
		for _, m := range []float64{0, 2, math.Copysign(0, -1)} {
			for _, n := range []int{math.MinInt, -1, 0, 1, 2, 7, 62, 63, 64, 1000, math.MaxInt} {
				ceil := Exponential{Base: bm[0], Max: bm[1], Multiplier: m}.Delay(n, 0)
				e := Exponential{Base: bm[0], Max: bm[1], Multiplier: m, Jitter: Full}
				var hi time.Duration
				for range 200 {
					d := e.Delay(n, 0)
					if d < 0 || d > ceil {
						t.Fatalf("base %v max %v m %v n %d: %v out of [0, %v]", bm[0], bm[1], m, n, d, ceil)
					}
					hi = max(hi, d)
				}
				if ceil > 1 && hi < ceil/2 {
					t.Fatalf("base %v max %v m %v n %d: 200 draws all below %v: not spread over [0, %v]", bm[0], bm[1], m, n, ceil/2, ceil)
				}
			}
		}
	}
}
