package admission_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// probeAfter drives l with one request at a time, each taking step, until
// it probes, and returns when the probe began.
func probeAfter(t *testing.T, l *admission.Limiter, f *clocktest.Fake, step time.Duration) time.Duration {
	t.Helper()
	for i := 0; !l.Probing(); i++ {
		if i > 10_000 {
			t.Fatal("no probe")
		}
		p := mustAcquire(t, l)
		f.Advance(step)
		p.Release()
	}
	return f.Since(clocktest.Epoch)
}

// TestProbeLengthSeparateFromWindow (review, #38): Config.ProbeLength sets
// how long a probe pins the limit, apart from Window: with 1 s windows
// and a 50 ms probe, the limit is back after the first release 50 ms into
// the probe, and the probe's RTT reaches the algorithm. (Before: a probe
// lasted a whole window, so a longer window pinned the limit longer.)
func TestProbeLengthSeparateFromWindow(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recording{limit: 50}
	l := newLimiter(t, admission.Config{
		Limit: rec, Clock: f, Window: time.Second, WindowSamples: 1,
		ProbeInterval: 5 * time.Second, ProbeJitter: -1, ProbeLength: 50 * time.Millisecond,
	})
	probeAfter(t, l, f, 250*time.Millisecond)
	if got := l.Limit(); got != admission.DefaultProbeLimit {
		t.Fatalf("limit %d while probing, want %d", got, admission.DefaultProbeLimit)
	}
	p := mustAcquire(t, l)
	f.Advance(30 * time.Millisecond)
	p.Release()
	if !l.Probing() {
		t.Fatal("the probe ended 30ms in, before its 50ms")
	}
	p = mustAcquire(t, l)
	f.Advance(30 * time.Millisecond)
	p.Release()
	if l.Probing() || l.Limit() != 50 {
		t.Fatalf("60ms into a 50ms probe: probing %v, limit %d; want the limit back at 50", l.Probing(), l.Limit())
	}
	if len(rec.noLoad) != 1 || rec.noLoad[0] != 30*time.Millisecond {
		t.Fatalf("SetNoLoadRTT heard %v, want [30ms]", rec.noLoad)
	}
	// The window after the probe is a whole Window again.
	samples := rec.samples
	p = mustAcquire(t, l)
	f.Advance(500 * time.Millisecond)
	p.Release()
	if rec.samples != samples {
		t.Fatal("a window closed 500ms after the probe, want 1s windows again")
	}
}

// TestProbeLengthLongerThanWindow: a probe may also be longer than a
// window; it then holds the limit for ProbeLength, and the windows
// around it keep their length.
func TestProbeLengthLongerThanWindow(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recording{limit: 50}
	l := newLimiter(t, admission.Config{
		Limit: rec, Clock: f, Window: 10 * time.Millisecond, WindowSamples: 1,
		ProbeInterval: time.Second, ProbeJitter: -1, ProbeLength: 100 * time.Millisecond,
	})
	probeAfter(t, l, f, 10*time.Millisecond)
	for range 9 {
		p := mustAcquire(t, l)
		f.Advance(10 * time.Millisecond)
		p.Release()
		if !l.Probing() {
			t.Fatalf("the probe ended %v in, before its 100ms", f.Since(clocktest.Epoch))
		}
	}
	p := mustAcquire(t, l)
	f.Advance(10 * time.Millisecond)
	p.Release()
	if l.Probing() {
		t.Fatal("the probe lasted past its 100ms")
	}
}

// TestProbeLengthValidated: a negative or absurd ProbeLength is refused,
// naming the field.
func TestProbeLengthValidated(t *testing.T) {
	for _, d := range []time.Duration{-1, math.MaxInt64/10 + 1} {
		err := admission.Config{ProbeLength: d}.Validate()
		if err == nil || !errors.Is(err, admission.ErrInvalidConfig) || !contains(err.Error(), "Config.ProbeLength is ") {
			t.Errorf("ProbeLength %d: %v; want ErrInvalidConfig naming Config.ProbeLength", d, err)
		}
	}
}

// TestZeroSeedLimitersProbeApart (sweep, defaults fail safe): Limiters
// left with Seed 0 (as the policy file's are) draw their probe jitter
// each from a seed of its own, so servers started together do not probe
// together. (Before: Seed 0 was one fixed seed, so every such Limiter
// probed at the same jittered time, defeating ProbeJitter.) A nonzero
// Seed still gives the same probe times.
func TestZeroSeedLimitersProbeApart(t *testing.T) {
	start := func(seed uint64) time.Duration {
		f := clocktest.NewFake()
		l := newLimiter(t, admission.Config{Limit: &recording{limit: 10}, Clock: f, Window: time.Millisecond, WindowSamples: 1,
			ProbeInterval: time.Second, ProbeJitter: 0.5, Seed: seed})
		return probeAfter(t, l, f, time.Millisecond)
	}
	seen := map[time.Duration]bool{}
	for range 6 {
		seen[start(0)] = true
	}
	if len(seen) == 1 {
		t.Fatalf("six Limiters with Seed 0 all probed first at %v: their jitter is not their own", start(0))
	}
	if a, b := start(42), start(42); a != b {
		t.Fatalf("Seed 42 probed first at %v, then at %v: want the same", a, b)
	}
}

// TestZeroSeedVegasProbeApart (sweep, defaults fail safe): Vegas limits
// left with Seed 0 (as the policy file's are) re-measure their no-load
// RTT after a number of samples drawn from a seed of each one's own; a
// nonzero Seed still gives the same count.
func TestZeroSeedVegasProbeApart(t *testing.T) {
	at := func(seed uint64) int {
		v, err := admission.NewVegas(admission.VegasConfig{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return v.ProbeAtForTest()
	}
	seen := map[int]bool{}
	for range 6 {
		seen[at(0)] = true
	}
	if len(seen) == 1 {
		t.Fatalf("six Vegas with Seed 0 all re-measure after %d samples", at(0))
	}
	if a, b := at(42), at(42); a != b {
		t.Fatalf("Seed 42 gave %d, then %d: want the same", a, b)
	}
}
