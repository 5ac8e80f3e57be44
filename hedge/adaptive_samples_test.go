package hedge_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
)

// TestAdaptiveSamplesCountsTheWindow: Samples counts the attempts in the
// window, answered and cancelled unanswered alike, even below MinSamples,
// and forgets them once the window has passed.
func TestAdaptiveSamplesCountsTheWindow(t *testing.T) {
	clk := clocktest.NewFake()
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{Window: 10 * time.Second, MinSamples: 100, Clock: clk})
	if n := a.Samples(); n != 0 {
		t.Fatalf("new: Samples %d", n)
	}
	for range 3 {
		a.Observe(10 * time.Millisecond)
	}
	a.ObserveUnanswered(50 * time.Millisecond)
	clk.Advance(time.Second) // the next slot: the cached figures are recomputed
	if n := a.Samples(); n != 4 {
		t.Fatalf("Samples %d, want 4 (3 answered, 1 unanswered)", n)
	}
	if _, ok := a.Delay(); ok {
		t.Fatal("a delay from 3 answers with MinSamples 100")
	}
	clk.Advance(11 * time.Second)
	if n := a.Samples(); n != 0 {
		t.Fatalf("after the window: Samples %d, want 0", n)
	}
	var nilA *hedge.Adaptive
	if nilA.Samples() != 0 {
		t.Fatal("nil Adaptive")
	}
}
