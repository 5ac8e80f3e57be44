package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

// panicSource is a rand.Source that panics on every draw.
type panicSource struct{}

func (panicSource) Uint64() uint64 { panic("boom") }

// TestPanickingSourceDoesNotWedgeLockedDraws: a rand source that panics
// inside a locked draw (Uniform, a strategy's jitter, Shared) must leave
// the process-wide source lock free, or every later locked draw in the
// process — each breaker's open-period jitter among them — blocks for
// good.
func TestPanickingSourceDoesNotWedgeLockedDraws(t *testing.T) {
	draws := map[string]func(){
		"Uniform":         func() { Uniform(panicSource{}, 10) },
		"strategy":        func() { Exponential{Jitter: Full, Rand: panicSource{}}.Delay(3, 0) },
		"Shared":          func() { Shared(panicSource{}).Uint64() },
		"Uniform(Shared)": func() { Uniform(Shared(panicSource{}), 10) },
	}
	for name, draw := range draws {
		t.Run(name, func(t *testing.T) {
			func() {
				defer func() {
					if v := recover(); v != "boom" {
						t.Fatalf("recovered %v, want the source's panic to go on", v)
					}
				}()
				draw()
			}()
			if !sourceMu.TryLock() {
				sourceMu.Unlock() // free it for the other cases
				t.Fatal("the source lock is still held after the source panicked: every locked draw now blocks")
			}
			sourceMu.Unlock()
			// And a locked draw still works.
			if d := (Constant{Interval: time.Second, Jitter: Full, Rand: rand.NewPCG(1, 2)}).Delay(1, 0); d < 0 || d > time.Second {
				t.Fatalf("delay %v", d)
			}
		})
	}
}

// zeroSource is a broken rand.Source that always returns 0: every draw
// falls in the rejection zone of the multiply-shift bound whenever the
// bound is not a power of two.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }

// TestBrokenSourceDoesNotSpinUnderTheLock: a source that always returns
// 0 made uniformFrom's rejection loop run forever while it held the
// process-wide source lock, wedging every locked draw in the process
// (every breaker's open-period jitter among them). The loop is bounded:
// the draw returns an in-range value and the lock is free.
func TestBrokenSourceDoesNotSpinUnderTheLock(t *testing.T) {
	done := make(chan time.Duration, 1)
	go func() {
		done <- Exponential{Base: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: Full, Rand: zeroSource{}}.Delay(3, 0)
	}()
	select {
	case d := <-done:
		if d < 0 || d > 400*time.Millisecond {
			t.Fatalf("delay %v, want within [0, 400ms]", d)
		}
	case <-time.After(time.Minute): // a generous bound: the loop either ends at once or never
		t.Fatal("a draw from a source that always returns 0 never ended")
	}
	if v := Uniform(zeroSource{}, 1000); v > 1000 {
		t.Fatalf("Uniform gave %d, want at most 1000", v)
	}
	if !sourceMu.TryLock() {
		t.Fatal("the source lock is held after the draw")
	}
	sourceMu.Unlock()
}
