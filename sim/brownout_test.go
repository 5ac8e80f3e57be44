package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// The SRE book's claim (ch. 21, "Client-side throttling"): with adaptive
// throttling the requests that reach the backend settle near K times the
// requests it accepts. The lab holds it within 10% for K=2 and K=1.1
// over the settled part of the brownout, and the throttles reject a
// share of requests locally that grows as K falls.
func TestBrownoutSREOfferedLoadSettlesNearKTimesAccepted(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "brownout", Options{Seed: 1})
	c := rep.Cases[0]
	var prev float64
	for _, k := range []struct {
		policy string
		k      float64
	}{{PolicySREK2, 2}, {PolicySREK11, 1.1}} {
		var trials []Series
		for _, r := range c.Rows {
			if r.Policy == k.policy {
				trials = r.trials
			}
		}
		if len(trials) != 3 {
			t.Fatalf("%d series for %s, want 3 trials", len(trials), k.policy)
		}
		// The mean of the trials, as the note and the reproductions
		// table give it.
		var off, acc float64
		for _, s := range trials {
			o, a := BrownoutOfferedAndAccepted(&s)
			off, acc = off+o/3, acc+a/3
		}
		if acc < 150 || math.Abs(off/acc-k.k) > 0.1*k.k {
			t.Errorf("%s: %.0f/s offered for %.0f/s accepted (%.2fx), want K=%v within 10%%", k.policy, off, acc, off/acc, k.k)
		}
		local := row(t, c, k.policy).LocalRejected
		if local <= prev {
			t.Errorf("%s: %.1f%% rejected locally, want more than %.1f%%", k.policy, 100*local, 100*prev)
		}
		prev = local
	}
	if got := row(t, c, PolicyNoRetry).LocalRejected; got != 0 {
		t.Errorf("no-retry: %.1f%% rejected locally without a limiter", 100*got)
	}
	if got := row(t, c, PolicyAWSAdaptive).LocalRejected; got <= 0 {
		t.Errorf("aws-adaptive: no local rejections: its waits never met the 5s deadline")
	}
}

// countLimiter counts Acquire and done calls, refuses every refuse-th
// request, and remembers the errors done heard.
type countLimiter struct {
	acquired, done, refused, refuse int
	errs                            []error
	order                           *[]string
}

var errLimRefused = errors.New("refused")

func (l *countLimiter) Acquire(_ context.Context, _ bool) (func(error), error) {
	l.acquired++
	*l.order = append(*l.order, "acquire")
	if l.refuse > 0 && l.acquired%l.refuse == 0 {
		l.refused++
		return nil, errLimRefused
	}
	return func(err error) { l.done++; l.errs = append(l.errs, err) }, nil
}

type orderBreaker struct {
	retry.Breaker
	order *[]string
}

func (b orderBreaker) Allow() (func(error), error) {
	*b.order = append(*b.order, "allow")
	return b.Breaker.Allow()
}

// The limiter seam: every attempt asks the limiter before the breaker;
// done hears each admitted attempt's result exactly once, the breaker's
// error when the breaker then refuses; refusals end the call and count
// as local rejections.
func TestLimiterSeamAcquiresBeforeTheBreakerAndReportsOnce(t *testing.T) {
	var order []string
	lim := &countLimiter{refuse: 5, order: &order}
	m := Model{Clients: 2, Arrival: Arrival{Kind: Poisson, Rate: 20}, Duration: 5 * time.Second, Drain: 5 * time.Second,
		Tiers:  []Tier{{Name: "s", Latency: Const(time.Millisecond), FailProb: 0.5}},
		Faults: []Fault{{Kind: FaultUnavailable, Tier: 0, Start: 2 * time.Second, End: 3 * time.Second}},
	}
	p := Policy{Name: "p", MaxAttempts: 3,
		Limiter: func(Env) retry.Limiter { return lim },
		Breaker: func(e Env) retry.Breaker {
			return orderBreaker{Breaker(breaker.Config{Window: breaker.Window{Duration: time.Second, FailureRatio: 0.5, MinCalls: 5}, OpenTimeout: time.Second})(e), &order}
		}}
	res, err := Run(&m, Variant{Name: "p", Policies: []Policy{p}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lim.acquired == 0 || lim.done+lim.refused != lim.acquired {
		t.Fatalf("acquired %d, done %d, refused %d: want done + refused = acquired", lim.acquired, lim.done, lim.refused)
	}
	open := 0
	for _, e := range lim.errs {
		if errors.Is(e, breaker.ErrOpen) {
			open++
		}
	}
	if open == 0 {
		t.Errorf("done never heard the breaker's refusal")
	}
	for i, o := range order {
		if o == "allow" && (i == 0 || order[i-1] != "acquire") {
			t.Fatalf("breaker asked at %d without the limiter just before: %v", i, order[max(0, i-3):i+1])
		}
	}
	want := float64(lim.refused) / (float64(lim.refused) + res.Metrics.Attempts)
	if got := res.Metrics.LocalRejected; math.Abs(got-want) > 1e-12 {
		t.Errorf("LocalRejected %v, want %v", got, want)
	}
}

// A limiter that would block (a plain throttle.Adaptive on the run's
// clock, not built by AdaptiveLimiter) under a policy without MaxElapsed
// is asked with a deadline of now: it refuses the attempts it would make
// wait, and the run ends, instead of blocking for virtual time that
// cannot pass while it waits (it hung the run before).
func TestBlockingLimiterWithoutMaxElapsedDoesNotHang(t *testing.T) {
	m := Model{Clients: 2, Arrival: Arrival{Kind: Poisson, Rate: 50}, Duration: 5 * time.Second, Drain: 5 * time.Second,
		Tiers:  []Tier{{Name: "s", Latency: Const(time.Millisecond)}},
		Faults: []Fault{{Kind: FaultUnavailable, Tier: 0, Start: time.Second, End: 3 * time.Second}},
	}
	p := Policy{Name: "p", MaxAttempts: 3,
		Limiter: func(e Env) retry.Limiter {
			return throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: e.Clock, Throttled: func(err error) bool { return err != nil }})
		}}
	done := make(chan error, 1)
	go func() {
		res, err := Run(&m, Variant{Name: "p", Policies: []Policy{p}}, 1)
		if err == nil && res.Metrics.LocalRejected == 0 {
			err = errors.New("no attempt was refused although the bucket was empty")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a guard against the hang, not a timing
		t.Fatal("the run blocked on the limiter")
	}
}
