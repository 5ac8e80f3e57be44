package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// sampleStats draws n samples of d and returns their mean and standard
// deviation in seconds, and the smallest and largest.
func sampleStats(d Dist, n int) (mean, sd float64, lo, hi time.Duration) {
	r := rand.New(rand.NewPCG(7, 11))
	var sum, sum2 float64
	lo = time.Duration(math.MaxInt64)
	for i := 0; i < n; i++ {
		x := d.Sample(r)
		lo, hi = min(lo, x), max(hi, x)
		f := x.Seconds()
		sum += f
		sum2 += f * f
	}
	mean = sum / float64(n)
	return mean, math.Sqrt(sum2/float64(n) - mean*mean), lo, hi
}

func TestDistributionsHaveTheirMoments(t *testing.T) {
	const n = 200_000
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	tests := []struct {
		name     string
		d        Dist
		mean, sd float64 // seconds
		lo, hi   time.Duration
	}{
		{"const", Const(5 * time.Millisecond), 0.005, 0, ms(5), ms(5)},
		{"exp", Exp(10 * time.Millisecond), 0.010, 0.010, 0, time.Hour},
		// |Normal(10ms, 2ms)| is, to many decimals, Normal(10ms, 2ms).
		{"normal", Normal(10*time.Millisecond, 2*time.Millisecond), 0.010, 0.002, 0, time.Hour},
		{"uniform", Uniform(50*time.Millisecond, 150*time.Millisecond), 0.100, 0.1 / math.Sqrt(12), ms(50), ms(150)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, sd, lo, hi := sampleStats(tt.d, n)
			// The sample mean is within 5 standard errors.
			if se := math.Max(tt.sd, 1e-9) / math.Sqrt(n); math.Abs(mean-tt.mean) > 5*se {
				t.Errorf("mean %.6fs, want %.6fs ± %.6f", mean, tt.mean, 5*se)
			}
			if math.Abs(sd-tt.sd) > 0.02*tt.sd+1e-9 {
				t.Errorf("sd %.6fs, want %.6fs", sd, tt.sd)
			}
			if lo < tt.lo || hi > tt.hi {
				t.Errorf("range [%v, %v] outside [%v, %v]", lo, hi, tt.lo, tt.hi)
			}
			if got := tt.d.Mean().Seconds(); math.Abs(got-tt.mean) > 1e-6 {
				t.Errorf("Mean() = %v, want %v", got, tt.mean)
			}
		})
	}
}

func TestFoldedNormalNeverNegative(t *testing.T) {
	d := Normal(time.Millisecond, 5*time.Millisecond) // mostly folded
	mean, _, lo, _ := sampleStats(d, 100_000)
	if lo < 0 {
		t.Fatalf("negative sample %v", lo)
	}
	// E|X| for X ~ N(1, 5) in ms.
	if want := d.Mean().Seconds(); math.Abs(mean-want) > 0.02*want {
		t.Fatalf("mean %v, want E|X| = %v", mean, want)
	}
}

func TestLogNormalMedian(t *testing.T) {
	d := LogNormal(20*time.Millisecond, 0.5)
	r := rand.New(rand.NewPCG(1, 2))
	below := 0
	const n = 100_000
	for i := 0; i < n; i++ {
		if d.Sample(r) < 20*time.Millisecond {
			below++
		}
	}
	if f := float64(below) / n; math.Abs(f-0.5) > 0.01 {
		t.Fatalf("%.3f of samples below the median", f)
	}
}

func TestParseDist(t *testing.T) {
	good := map[string]Dist{
		"10ms":                Const(10 * time.Millisecond),
		"0":                   Const(0),
		" const(2s) ":         Const(2 * time.Second),
		"exp(10ms)":           Exp(10 * time.Millisecond),
		"normal(10ms, 2ms)":   Normal(10*time.Millisecond, 2*time.Millisecond),
		"uniform(5ms,15ms)":   Uniform(5*time.Millisecond, 15*time.Millisecond),
		"lognormal(10ms,0.5)": LogNormal(10*time.Millisecond, 0.5),
	}
	for in, want := range good {
		got, err := ParseDist(in)
		if err != nil || got != want {
			t.Errorf("ParseDist(%q) = %v, %v; want %v", in, got, err, want)
		}
		back, err := ParseDist(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q through %q gave %v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "-1ms", "exp()", "exp(1ms,2ms)", "normal(1ms)", "uniform(2ms,1ms)",
		"lognormal(1ms,x)", "lognormal(1ms,-1)", "gamma(1ms)", "exp(1ms", "exp(forever)", "48h"} {
		if _, err := ParseDist(in); !errors.Is(err, ErrDist) {
			t.Errorf("ParseDist(%q) error %v, want ErrDist", in, err)
		}
	}
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"10ms", "exp(10ms)", "normal(10ms,2ms)", "uniform(1ms,2ms)", "lognormal(5ms,0.3)", "x(", "()"} {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(1, 1))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			if !errors.Is(err, ErrDist) {
				t.Fatalf("error %v does not wrap ErrDist", err)
			}
			return
		}
		back, err := ParseDist(d.String())
		if err != nil || back != d {
			t.Fatalf("%q parsed as %v, which reads back as %v, %v", s, d, back, err)
		}
		for i := 0; i < 10; i++ {
			if x := d.Sample(r); x < 0 {
				t.Fatalf("%v sampled %v", d, x)
			}
		}
	})
}
