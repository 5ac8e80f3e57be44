package backoff

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProportionalAtCapHasNoAtom: at the cap, proportional jitter must not
// put a measurable share of draws on Max (clipping the window after the
// draw put about half of them there), and never exceeds Max.
func TestProportionalAtCapHasNoAtom(t *testing.T) {
	const n = 10000
	maxD := 2 * time.Second
	for _, s := range []Strategy{
		Exponential{Base: 100 * ms, Max: maxD, Jitter: Proportional, Rand: rand.NewPCG(3, 3)},
		Linear{Base: 100 * ms, Max: maxD, Jitter: Proportional, Rand: rand.NewPCG(4, 4)},
		Constant{Interval: maxD, Jitter: Proportional, Rand: rand.NewPCG(5, 5)},
	} {
		counts := map[time.Duration]int{}
		ds := draws(s, 40, n, 0) // far past the cap
		for _, d := range ds {
			if d > maxD || d < maxD-maxD/5 {
				t.Fatalf("%T: %v outside [%v, %v]", s, d, maxD-maxD/5, maxD)
			}
			counts[d]++
		}
		for d, c := range counts {
			if c > n/100 {
				t.Fatalf("%T: %d of %d capped draws (%.0f%%) sit on %v", s, c, n, 100*float64(c)/n, d)
			}
		}
		// Uniform over [0.8·Max, Max] (KS critical value at α = 0.001).
		if d := ksUniform(ds, maxD-maxD/5, maxD); d > 0.0195 {
			t.Errorf("%T: KS D = %.4f against U[0.8·Max, Max]", s, d)
		}
	}
	// Just below the cap the window is cut at Max, not shifted.
	e := Exponential{Base: 100 * ms, Max: 1000 * ms, Jitter: Proportional, Rand: rand.NewPCG(6, 6)}
	for _, d := range draws(e, 4, n, 0) { // T = 800ms: [640ms, 960ms]
		if d < 640*ms || d > 960*ms {
			t.Fatalf("T=800ms: %v outside [640ms, 960ms]", d)
		}
	}
}

// TestSharedNonConcurrentSource: a strategy holding a source that is not
// safe for concurrent use (rand.NewPCG) may still be shared; under -race
// the start commit reported a data race here.
func TestSharedNonConcurrentSource(t *testing.T) {
	shared := []Strategy{
		Exponential{Jitter: Full, Rand: rand.NewPCG(1, 2)},
		Linear{Jitter: Decorrelated, Rand: rand.NewChaCha8([32]byte{1})},
		Constant{Interval: time.Second, Jitter: Proportional, Rand: rand.NewPCG(3, 4)},
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i < 500; i++ {
				for _, s := range shared {
					if d := s.Delay(i, 0); d < 0 || d > DefaultMax {
						t.Errorf("%T: delay %v", s, d)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range shared {
		if a := testing.AllocsPerRun(100, func() { s.Delay(3, ms) }); a != 0 {
			t.Errorf("%T: %v allocs", s, a)
		}
	}
	if Uniform(rand.NewPCG(1, 1), 0) != 0 || Uniform(nil, 5) > 5 {
		t.Fatal("Uniform out of range")
	}
}

// TestDecorrelatedDocMatchesCode: the package doc gives the formula the
// code draws, U[Base, min(Max, 3·prev)] (not AWS's min(Max, U[Base,
// 3·prev]), which piles capped draws on Max), and the draws bear it out.
func TestDecorrelatedDocMatchesCode(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "Decorrelated  uniform [Base, min(Max, 3·prev)]") {
		t.Fatal("doc.go does not give decorrelated jitter as uniform [Base, min(Max, 3·prev)]")
	}
	const n = 10000
	base, maxD := 100*ms, time.Second
	e := Exponential{Base: base, Max: maxD, Jitter: Decorrelated, Rand: rand.NewPCG(8, 8)}
	ds := draws(e, 5, n, maxD) // 3·prev = 3s > Max
	atMax := 0
	for _, d := range ds {
		if d == maxD {
			atMax++
		}
	}
	if atMax > n/100 {
		t.Fatalf("%d of %d draws on Max", atMax, n)
	}
	if d := ksUniform(ds, base, maxD); d > 0.0195 {
		t.Fatalf("KS D = %.4f against U[Base, Max]", d)
	}
}
