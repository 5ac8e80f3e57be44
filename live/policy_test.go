package live_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

func env() sim.Env { return sim.Env{Clock: clock.Real, Rand: backoff.NewSource(1)} }

func TestRetryPolicyMapping(t *testing.T) {
	params := sim.PolicyParams{MaxAttempts: -1, Base: time.Second, Max: 30 * time.Second, MaxElapsed: time.Minute}
	for _, name := range sim.PolicyNames() {
		sp, err := sim.StandardPolicy(name, params)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := live.RetryPolicy(sp, env(), backoff.NewSource(2), 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := sp.MaxAttempts
		if want <= 0 {
			want = retry.Unlimited // sim's 0 is no count limit; retry's 0 would be 3
		}
		if rp.Operation != name || rp.MaxAttempts != want || rp.MaxElapsed != time.Minute || rp.Clock != clock.Real {
			t.Errorf("%s: %+v from %+v", name, rp, sp)
		}
		if rp.AttemptTimeout != 2*time.Second {
			t.Errorf("%s: attempt timeout %v, want the server's 2s", name, rp.AttemptTimeout)
		}
		if rp.Backoff == nil {
			t.Fatalf("%s: nil backoff would mean retry.DefaultBackoff", name)
		}
		if (rp.Budget != nil) != (sp.Budget != nil) || (rp.Breaker != nil) != (sp.Breaker != nil) {
			t.Errorf("%s: budget %v breaker %v", name, rp.Budget, rp.Breaker)
		}
	}
	imm, _ := sim.StandardPolicy(sim.PolicyImmediate, sim.PolicyParams{})
	rp, _ := live.RetryPolicy(imm, env(), nil, 0)
	for n := 1; n < 10; n++ {
		if d := rp.Backoff.Delay(n, 0); d != 0 {
			t.Fatalf("immediate: delay %v before retry %d, want 0", d, n)
		}
	}
	exp, _ := sim.StandardPolicy(sim.PolicyExponential, params)
	rp, _ = live.RetryPolicy(exp, env(), nil, 0)
	if d := rp.Backoff.Delay(3, 0); d != 4*time.Second {
		t.Errorf("exponential: third delay %v, want 4s", d)
	}
	g, _ := sim.StandardPolicy(sim.PolicyGuarded, params)
	rp, _ = live.RetryPolicy(g, env(), nil, 0)
	if _, ok := rp.Budget.(*budget.Ratio); !ok {
		t.Errorf("budget %T, want *budget.Ratio", rp.Budget)
	}
	if b, ok := rp.Breaker.(*breaker.Breaker); !ok || b.State() != breaker.Closed {
		t.Errorf("breaker %T, want a closed *breaker.Breaker", rp.Breaker)
	}
	own := sim.Policy{Name: "own", AttemptTimeout: time.Second}
	if rp, _ := live.RetryPolicy(own, env(), nil, 5*time.Second); rp.AttemptTimeout != time.Second {
		t.Errorf("the policy's own attempt timeout was replaced: %v", rp.AttemptTimeout)
	}
	_, err := live.RetryPolicy(sim.Policy{Name: "rb", BreakerRetriesOnly: true}, env(), nil, 0)
	if !errors.Is(err, sim.ErrPolicy) {
		t.Errorf("retries-only breaker: err = %v, want sim.ErrPolicy", err)
	}
}

func TestParseScope(t *testing.T) {
	for _, s := range []live.Scope{live.Shared, live.PerClient} {
		got, err := live.ParseScope(strings.ToUpper(s.String()))
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := live.ParseScope("global"); !errors.Is(err, live.ErrScenario) {
		t.Errorf("err = %v, want ErrScenario", err)
	}
	if s := live.Scope(7).String(); s != "scope(7)" {
		t.Errorf("String = %q", s)
	}
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"shared", "per-client", "Per-Client", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := live.ParseScope(s)
		if err != nil {
			if !errors.Is(err, live.ErrScenario) {
				t.Fatalf("error %v does not wrap ErrScenario", err)
			}
			return
		}
		if !strings.EqualFold(sc.String(), s) {
			t.Fatalf("ParseScope(%q) = %v", s, sc)
		}
		if back, err := live.ParseScope(sc.String()); err != nil || back != sc {
			t.Fatalf("round trip of %v: %v, %v", sc, back, err)
		}
	})
}
