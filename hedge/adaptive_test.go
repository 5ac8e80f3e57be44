package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
)

// The adaptive delay follows the window's p95, within a bucket (12.5%),
// never below the floor, and forgets samples older than the window.
func TestAdaptiveFollowsP95WithFloor(t *testing.T) {
	clk := clocktest.NewFake()
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{Window: 10 * time.Second, Floor: 5 * time.Millisecond, Clock: clk})
	if _, ok := a.Delay(); ok {
		t.Fatal("a delay without samples")
	}
	for i := 1; i <= 100; i++ {
		a.Observe(time.Duration(i) * time.Millisecond)
	}
	clk.Advance(time.Second) // the cache is refreshed once per slot
	d, ok := a.Delay()
	if p95 := 95 * time.Millisecond; !ok || d < p95 || d > p95*9/8 {
		t.Fatalf("Delay = %v, %v; want p95 %v (within 12.5%% above)", d, ok, p95)
	}

	// Fast answers: the floor holds. Ten seconds on, the old slot is out.
	clk.Advance(10 * time.Second)
	for range 100 {
		a.Observe(100 * time.Microsecond)
	}
	clk.Advance(time.Second)
	if d, ok := a.Delay(); !ok || d != 5*time.Millisecond {
		t.Fatalf("Delay = %v, %v; want the 5ms floor", d, ok)
	}

	// Too few samples in the window: no adaptive delay.
	clk.Advance(11 * time.Second)
	for range 19 {
		a.Observe(time.Second)
	}
	clk.Advance(time.Second)
	if d, ok := a.Delay(); ok {
		t.Fatalf("Delay = %v with 19 samples (MinSamples 20)", d)
	}
}

// Do arms its hedge timer at the adaptive delay once there are samples,
// and at the fixed Delay before.
func TestDoUsesAdaptiveDelay(t *testing.T) {
	clk := clocktest.NewFake()
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk})
	h := &hedge.Hedger{Policy: policy(clk, nil), Delay: time.Second, Adaptive: a}
	armedAt := func() time.Duration {
		t.Helper()
		s := newScript()
		out := run(h, s)
		s.wait(t, 1)
		clk.BlockUntil(1)
		d := clk.Deadlines()[0]
		s.answer(1, "v", nil)
		get(t, out)
		return d
	}
	if d := armedAt(); d != time.Second {
		t.Fatalf("without samples the timer is armed at %v, want 1s", d)
	}
	for range 40 {
		a.Observe(30 * time.Millisecond)
	}
	clk.Advance(time.Second)
	// 30ms lies in the bucket [29.36ms, 31.46ms).
	if d := armedAt(); d < 30*time.Millisecond || d > 32*time.Millisecond {
		t.Fatalf("with samples at 30ms the timer is armed at %v", d)
	}
	_ = context.Background
}

// The adaptive tracker does not allocate.
func TestAdaptiveAllocs(t *testing.T) {
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{})
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		a.ObserveAt(now, time.Millisecond)
		a.DelayAt(now.Add(time.Hour))
		now = now.Add(time.Second)
	}); n != 0 {
		t.Fatalf("%v allocs per Observe+Delay", n)
	}
}
