package sim

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/throttle"
)

// The brownout scenario's contenders (issue 21).
const (
	PolicyBrownoutBreaker = "breaker"
	PolicySREK2           = "sre-k2"
	PolicySREK11          = "sre-k1.1"
	PolicyAWSAdaptive     = "aws-adaptive"
)

// Brownout model constants: the window of the capacity loss, in virtual
// time, and the SRE throttles' window (the book's 2 minutes scaled to the
// 60s brownout, so that the brownout fills it).
const (
	BrownoutStart     = 30 * time.Second
	BrownoutEnd       = 90 * time.Second
	BrownoutSREWindow = 10 * time.Second
)

// brownoutSpec: a backend loses half its capacity for 60s while the
// clients keep their demand.
func brownoutSpec() ModelSpec {
	retries := func(name string) Policy {
		p, err := StandardPolicy(PolicyFull, PolicyParams{Base: 50 * time.Millisecond, Max: time.Second})
		if err != nil {
			panic(err)
		}
		p.Name = name
		p.MaxElapsed = 5 * time.Second
		return p
	}
	sre := func(name string, k float64) Variant {
		p := retries(name)
		p.Limiter = SRELimiter(throttle.SREConfig{K: k, Window: BrownoutSREWindow, Buckets: 10})
		return Variant{Name: name, Policies: []Policy{p},
			Doc: fmt.Sprintf("3 retries (full jitter from 50ms) behind the SRE book's adaptive throttling per client (throttle.NewSRE, K=%g, a 10s window of 10 buckets): every attempt is rejected locally with probability max(0, (requests − K·accepts) / (requests + 1)); 503s are not accepts", k)}
	}
	brk := retries(PolicyBrownoutBreaker)
	brk.Breaker = Breaker(DefaultBreaker())
	aws := retries(PolicyAWSAdaptive)
	aws.Limiter = AdaptiveLimiter(throttle.AdaptiveConfig{})
	withBudget := retries(PolicyBudget)
	withBudget.Budget = RatioBudget(budget.TenPercent())
	return ModelSpec{
		Name:  "brownout",
		Title: "Brownout: the backend loses half its capacity for 60s, the clients keep their demand",
		Doc: `20 clients send 18 calls/s each (360/s, Poisson) to a backend of 20 workers with exponential
service time of mean 50ms (400/s) and a queue of 20: a full queue answers 503 at once. Network legs
take |Normal(1ms, 0.2ms)|; the attempt timeout is 1s, and a retrying call gives up after 5s (MaxElapsed, which also bounds
a limiter's wait). From t=30s to t=90s the backend keeps half its
workers (200/s, below the 360/s demand). Contenders: no retries; 3 retries with full jitter from
50ms through a budget.TenPercent token bucket per client; the same retries behind the default
breaker per client; the same retries behind the SRE book's client-side adaptive throttling
(throttle.NewSRE as the attempt path's retry.Limiter, asked before the breaker, K=2 and K=1.1, a
10s window: the book's 2 minutes scaled to the 60s brownout); and behind the AWS SDKs' adaptive
retry mode (throttle.NewAdaptive: a CUBIC-driven token bucket whose Acquire waits, on the
virtual clock). A 503 is an overload signal (not an accept) for both. The SRE book's claim: with
throttling the requests that reach the backend settle near K times the requests it accepts;
the note under the table sets the lab's figure beside it. Reported: the backend's offered load
(chart, with its capacity), the share of requests rejected locally, goodput and recovery. The
throttles forget the brownout over their windows, so a recovery within 30s of its end is slow,
not stuck: a policy is called stuck only after 40s of traffic after the brownout (--duration
130s or more), and unobserved in a shorter run.`,
		Model: Model{
			Clients:  20,
			Arrival:  Arrival{Kind: Poisson, Rate: 18},
			Duration: 120 * time.Second,
			Drain:    10 * time.Second,
			Warmup:   5 * time.Second,
			Tiers: []Tier{{Name: "backend", Workers: 20, Queue: 20, Service: Exp(50 * time.Millisecond),
				Latency: Normal(time.Millisecond, 200*time.Microsecond), Timeout: time.Second}},
			Faults: []Fault{{Kind: FaultCapacity, Tier: 0, Start: BrownoutStart, End: BrownoutEnd, Factor: 0.5}},
			// The throttles forget the brownout over their windows: a
			// recovery within three of them (30s) is slow, not stuck, so
			// stuck needs 40s of traffic after it (--duration 130s).
			RecoveryTolerance: 3 * BrownoutSREWindow,
		},
		Cases:    []ModelCase{{Name: "half capacity for 60s", Note: brownoutNote}},
		Columns:  []string{"amp", "attempts", "apc", "local", "goodput", "success", "inrun", "queue", "recovery", "p50", "p99", "p999"},
		Policies: []string{PolicyNoRetry, PolicyBudget, PolicyBrownoutBreaker, PolicySREK2, PolicySREK11, PolicyAWSAdaptive},
		Custom: []Variant{
			{Name: PolicyBudget, Policies: []Policy{withBudget}, Doc: "3 retries, full jitter from 50ms, through a budget.TenPercent token bucket per client"},
			{Name: PolicyBrownoutBreaker, Policies: []Policy{brk}, Doc: "3 retries, full jitter from 50ms, behind the default breaker per client (opens at 50% failures of at least 20 calls in 10s, open 5s)"},
			sre(PolicySREK2, 2),
			sre(PolicySREK11, 1.1),
			{Name: PolicyAWSAdaptive, Policies: []Policy{aws}, Doc: "3 retries, full jitter from 50ms, behind the AWS SDKs' adaptive mode per client (throttle.NewAdaptive: CUBIC β=0.7, C=0.4; attempts wait for a token on the virtual clock)"},
		},
		Trials: 3,
	}
}

// BrownoutSettle is the part of the brownout the SRE claim is judged
// over: from 20s into it (the throttles' 10s window full of brownout
// traffic, twice) to its end.
const BrownoutSettle = 20 * time.Second

// BrownoutOfferedAndAccepted returns a brownout row's mean offered load
// at the backend (attempts sent per second) and mean accepted rate
// (successful attempts per second: a single tier's successes are its
// calls' successes) over [BrownoutStart+BrownoutSettle, BrownoutEnd).
func BrownoutOfferedAndAccepted(s *Series) (offered, accepted float64) {
	from, to := (BrownoutStart + BrownoutSettle).Seconds(), BrownoutEnd.Seconds()
	return MeanRate(s.Load, s.StepMS, from, to), MeanRate(s.Goodput, s.StepMS, from, to)
}

// brownoutWindow is the window the SRE claim is judged over in case c, as
// run: from BrownoutSettle into the fault to its end or the end of
// traffic, whichever comes first; ok is false when that leaves less than
// a second.
func brownoutWindow(c *Case) (from, to float64, ok bool) {
	from, to = c.FaultStartS+BrownoutSettle.Seconds(), c.FaultEndS
	if c.TrafficEndS > 0 {
		to = min(to, c.TrafficEndS)
	}
	return from, to, to-from >= 1
}

func brownoutNote(c *Case) string {
	from, to, ok := brownoutWindow(c)
	var out string
	for _, k := range []struct {
		name string
		k    float64
	}{{PolicySREK2, 2}, {PolicySREK11, 1.1}} {
		for _, r := range c.Rows {
			if r.Policy != k.name || r.NotRun || len(r.trials) == 0 {
				continue
			}
			if out != "" {
				out += "; "
			}
			var off, acc float64
			for _, s := range r.trials {
				off += MeanRate(s.Load, s.StepMS, from, to) / float64(len(r.trials))
				acc += MeanRate(s.Goodput, s.StepMS, from, to) / float64(len(r.trials))
			}
			if !ok || acc == 0 {
				out += k.name + ": no figure"
				continue
			}
			out += fmt.Sprintf("%s: %.0f/s offered for %.0f/s accepted, %.2fx (K × accepted: %.0f/s)", k.name, off, acc, off/acc, k.k*acc)
		}
	}
	if out == "" {
		return ""
	}
	head := "The SRE book (ch. 21, \"Client-side throttling\"): requests reaching the backend settle near K × accepts. "
	if !ok {
		return head + fmt.Sprintf("The lab cannot say: the traffic stops at %.0fs, before the throttles settle (%.0fs into the brownout, from %.0fs): ", c.TrafficEndS, BrownoutSettle.Seconds(), from) + out
	}
	return head + fmt.Sprintf("The lab, from %.0fs to %.0fs, the mean of %s: ", from, to, trialsPhrase(c)) + out
}

// trialsPhrase says how many trials a case's rows hold: "3 trials", "the
// one trial".
func trialsPhrase(c *Case) string {
	n := 0
	for _, r := range c.Rows {
		n = max(n, len(r.trials))
	}
	if n == 1 {
		return "the one trial"
	}
	return fmt.Sprintf("%d trials", n)
}
