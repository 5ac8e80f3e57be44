package simtest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/throttle"
)

// TestCheckAdaptiveLimiterHearsWhatRegistryHears: stormsim check must
// simulate the limiter the Registry builds. For kind aws_adaptive
// (default throttle_on: aws, awsretry.IsThrottle: 429 and the AWS codes,
// not 503) the Registry's limiter ignores a 503, but specLimiter fell
// back to throttle.IsOverload and treated every 503 as throttling. (A
// limiter that does throttle would make Acquire wait on the virtual
// clock, which nothing advances here: the 503 cases are the ones to
// test.)
func TestCheckAdaptiveLimiterHearsWhatRegistryHears(t *testing.T) {
	for block, want := range map[string]bool{
		"{kind: aws_adaptive}":                   false,
		"{kind: aws_adaptive, throttle_on: aws}": false,
	} {
		f, err := config.Parse("p.yaml", []byte("policies:\n  p:\n    limiter: "+block+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		enabled := func(l retry.Limiter) bool {
			for range 5 {
				done, err := l.Acquire(context.Background(), false)
				if err != nil {
					break
				}
				done(answer(sim.ErrOverloaded, false)) // a 503, as the sim hands it to the policy
			}
			return l.(interface{ Stats() throttle.AdaptiveStats }).Stats().Enabled
		}
		r := config.NewRegistry(config.Options{Clock: sim.New(0).Clock()})
		if err := r.Apply(f); err != nil {
			t.Fatal(err)
		}
		reg := enabled(r.Policy("p").Policy().Limiter)
		env := sim.Env{Clock: sim.New(0).Clock(), Rand: rand.NewPCG(1, 2)}
		simd := enabled(specLimiter(f.Policies["p"].Limiter, &seams{})(env))
		if reg != want || simd != want {
			t.Errorf("limiter %s after 503s: the Registry's limiter throttles = %v, stormsim check's = %v; want %v", block, reg, simd, want)
		}
		r.Close()
	}
}

// TestCheckSRELimiterHonoursThrottleOn: limiter {kind: sre, throttle_on:
// aws}: the Registry's SRE counts only AWS throttling answers (a 429), so
// a storm of 503s is never shed; specLimiter built throttle.NewSRE with
// Overload nil (throttle.IsOverload), so stormsim check shed on 503s,
// simulating a policy the service does not run. Without throttle_on both
// shed.
func TestCheckSRELimiterHonoursThrottleOn(t *testing.T) {
	for block, sheds := range map[string]bool{
		"{kind: sre, throttle_on: aws}": false,
		"{kind: sre}":                   true,
	} {
		f, err := config.Parse("p.yaml", []byte("policies:\n  p:\n    limiter: "+block+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		refused := func(l retry.Limiter) int {
			n := 0
			for range 400 {
				done, err := l.Acquire(context.Background(), false)
				if err != nil {
					n++
					continue
				}
				done(answer(sim.ErrOverloaded, false)) // a 503
			}
			return n
		}
		r := config.NewRegistry(config.Options{Clock: sim.New(0).Clock()})
		if err := r.Apply(f); err != nil {
			t.Fatal(err)
		}
		reg := refused(r.Policy("p").Policy().Limiter)
		env := sim.Env{Clock: sim.New(0).Clock(), Rand: rand.NewPCG(1, 2)}
		simd := refused(specLimiter(f.Policies["p"].Limiter, &seams{})(env))
		if (reg > 0) != sheds || (simd > 0) != sheds {
			t.Errorf("%s, 400 attempts answered 503: the Registry's SRE refused %d, stormsim check's %d; want shedding %v", block, reg, simd, sheds)
		}
		r.Close()
	}
}
