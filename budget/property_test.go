package budget_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// The property tests drive each budget with random sequences of the calls
// retry.Do makes (first attempts that succeed or fail, retries that are
// asked for, run, succeed, fail or are abandoned, and time passing) and
// check two things after every step: the budget decides exactly as a plain
// model of its documented rule does, and the retries it granted never
// exceed what its definition allows.

const unit = 1_000_000 // budgets count in millionths of a token or retry

func micro(x float64) int64 { return int64(math.Round(x * unit)) }

// milli draws a number of thousandths in [lo, hi] as a float.
func milli(t *rapid.T, lo, hi int, label string) float64 {
	return float64(rapid.IntRange(lo, hi).Draw(t, label)) / 1000
}

// ratioModel is the documented RatioConfig rule, sequentially, in millionths.
type ratioModel struct {
	max, tokens, refill, retryRefill int64
	retryCost, timeoutCost, failCost int64
	throttleCost                     int64
	threshold                        int64
	refund                           bool
	throttles                        budget.ThrottleRule
}

func newRatioModel(c budget.RatioConfig) *ratioModel {
	m := &ratioModel{
		max: micro(c.MaxTokens), refill: micro(c.Refill), retryRefill: micro(c.RetryRefill),
		retryCost: micro(c.RetryCost), timeoutCost: micro(c.TimeoutCost), failCost: micro(c.FailureCost),
		throttleCost: micro(c.ThrottleCost),
		threshold:    micro(c.Threshold), refund: c.RefundRetrySuccess, throttles: c.Throttles,
	}
	if m.max == 0 {
		m.max = 10 * unit
	}
	if m.refill == 0 {
		m.refill = unit / 10
	}
	if m.retryCost == 0 && m.failCost == 0 {
		m.retryCost = unit
	}
	if m.timeoutCost == 0 {
		m.timeoutCost = m.retryCost
	}
	if m.throttleCost == 0 {
		m.throttleCost = m.retryCost
	}
	m.tokens = micro(c.InitialTokens)
	if m.tokens == 0 && !c.StartEmpty {
		m.tokens = m.max
	}
	return m
}

func (m *ratioModel) add(d int64) { m.tokens = min(max(m.tokens+d, 0), m.max) }

func (m *ratioModel) cost(err error) int64 {
	if m.throttles != nil && m.throttles.IsThrottle(err) || m.throttles == nil && retry.IsThrottle(err) {
		return m.throttleCost
	}
	if budget.IsTimeout(err) {
		return m.timeoutCost
	}
	return m.retryCost
}

func drawRatioConfig(t *rapid.T) budget.RatioConfig {
	switch rapid.IntRange(0, 5).Draw(t, "preset") {
	case 5:
		return awsretry.Standard2026()
	case 0:
		return budget.GRPC()
	case 1:
		return awsretry.StandardLegacy()
	case 2:
		return budget.TenPercent()
	case 3:
		return budget.GRPCThrottling(milli(t, 1000, 1_000_000, "maxTokens"), milli(t, 1, 1000, "tokenRatio"))
	}
	maxT := milli(t, 1000, 200_000, "MaxTokens")
	hi := int(maxT * 1000)
	c := budget.RatioConfig{
		MaxTokens:          maxT,
		Refill:             milli(t, 0, 5000, "Refill"),
		RetryRefill:        milli(t, 0, 1000, "RetryRefill"),
		RefundRetrySuccess: rapid.Bool().Draw(t, "RefundRetrySuccess"),
		RetryCost:          milli(t, 0, hi, "RetryCost"),
		TimeoutCost:        milli(t, 0, hi, "TimeoutCost"),
		ThrottleCost:       milli(t, 0, hi, "ThrottleCost"),
		FailureCost:        milli(t, 0, 3000, "FailureCost"),
		Threshold:          milli(t, 0, hi-1, "Threshold"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "start") {
	case 0:
		c.StartEmpty = true
	case 1:
		c.InitialTokens = milli(t, 0, hi, "InitialTokens")
	}
	return c
}

// drawFailure returns a failed attempt's error and whether Do would retry it.
func drawFailure(t *rapid.T) (error, bool) {
	switch rapid.IntRange(0, 6).Draw(t, "error") {
	case 6:
		return &httpretry.StatusError{StatusCode: http.StatusTooManyRequests}, true
	case 0:
		return errSlow, true
	case 1:
		return netTimeout{}, true
	case 2:
		return retry.Permanent(errDown), false
	case 3:
		return fmt.Errorf("op: %w", context.Canceled), false
	}
	return errDown, true
}

// TestRatioProperties also lends the balance out and takes it back at
// random, gives cells leases of random sizes, and makes each call as a
// goroutine of a random cell: a lent-out Ratio must decide exactly as the
// one balance does.
func TestRatioProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawRatioConfig(t)
		r := budget.NewRatio(cfg)
		cell := func(t *rapid.T) int { return rapid.IntRange(0, budget.RatioCells-1).Draw(t, "cell") }
		m := newRatioModel(cfg)
		initial := m.tokens
		var (
			credits int64 // every token paid in, before the cap
			pending int   // granted retries not yet run
			want    budget.Stats
			minCost = min(m.retryCost, m.timeoutCost, m.throttleCost)
			maxCost = max(m.retryCost, m.timeoutCost, m.throttleCost)
		)
		// fail records a failed attempt and, as Do does after a retryable
		// failure that is not its last, asks for a retry.
		fail := func(t *rapid.T, isRetry bool) {
			err, retryable := drawFailure(t)
			budget.RecordAt(r, cell(t), isRetry, err)
			if m.failCost > 0 && retryable {
				m.add(-m.failCost)
			}
			if !retryable || !rapid.Bool().Draw(t, "ask") {
				return
			}
			cost := m.cost(err)
			wantOK := m.tokens >= cost && m.tokens > m.threshold
			if got := budget.WithdrawAt(r, cell(t), err); got != wantOK {
				t.Fatalf("Withdraw(%v) = %v with %d µtokens, cost %d, threshold %d; want %v", err, got, m.tokens, cost, m.threshold, wantOK)
			}
			if wantOK {
				m.tokens -= cost
				pending++
				want.Granted++
				// The retries granted so far, each with the failure before it,
				// cost at least Granted × (FailureCost + the lesser cost); the
				// bucket can only have paid that from its initial tokens and
				// what was paid in, keeping more than Threshold − cost.
				spent := int64(want.Granted) * (m.failCost + minCost)
				if limit := initial + credits - max(0, m.threshold-maxCost); spent > limit {
					t.Fatalf("%d retries granted cost %d µtokens, more than initial %d + credits %d − threshold", want.Granted, spent, initial, credits)
				}
			} else {
				want.Refused++
			}
		}
		steps(t, map[string]func(*rapid.T){
			"first attempt succeeds": func(t *rapid.T) {
				budget.RecordAt(r, cell(t), false, nil)
				m.add(m.refill)
				credits += m.refill
				want.Requests++
				want.Deposits++
			},
			"first attempt fails": func(t *rapid.T) {
				want.Requests++
				fail(t, false)
			},
			"retry runs": func(t *rapid.T) {
				if pending == 0 {
					return // not applicable now
				}
				pending--
				want.Retries++
				if rapid.Bool().Draw(t, "ok") {
					budget.RecordAt(r, cell(t), true, nil)
					d := m.retryRefill
					if m.refund {
						d += m.retryCost
					}
					m.add(d)
					credits += d
					return
				}
				fail(t, true)
			},
			"lend": func(t *rapid.T) { budget.Lend(r) },
			"collect": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "collect?") == 0 {
					budget.Collect(r)
				}
			},
			"lease": func(t *rapid.T) {
				budget.SetLease(r, cell(t), rapid.Float64Range(0, 1).Draw(t, "token share"), rapid.Float64Range(0, 1).Draw(t, "space share"))
			},
			"": func(t *rapid.T) {
				got := r.Available()
				if got < 0 || got > float64(m.max)/unit {
					t.Fatalf("Available() = %v, outside [0, %v]", got, float64(m.max)/unit)
				}
				if micro(got) != m.tokens {
					t.Fatalf("Available() = %v, model has %v", got, float64(m.tokens)/unit)
				}
				if s := r.Stats(); s != want {
					t.Fatalf("Stats() = %+v, want %+v", s, want)
				}
			},
		})
	})
}

// TestPresetBounds states the acceptance bound of each preset in its own
// terms: retries granted ≤ ratio × deposits + initial tokens.
func TestPresetBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   budget.RatioConfig
		bound func(deposits, retryWins int) float64
	}{
		// 0.1 token per successful call, 1 per retry, 10 to start.
		{"TenPercent", budget.TenPercent(), func(d, _ int) float64 { return 0.1*float64(d) + 10 }},
		// Each retry follows a failure costing 1; successes (retries too) add
		// 0.1; retries stop at 5 of the 10 starting tokens.
		{"GRPC", budget.GRPC(), func(d, w int) float64 { return 0.1*float64(d+w) + 10 - 5 }},
		// 500 tokens, retries cost at least 5, successes add 1, successful
		// retries refund 5.
		{"AWSStandard", awsretry.StandardLegacy(), func(d, w int) float64 { return (float64(d) + 5*float64(w) + 500) / 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				r := budget.NewRatio(tc.cfg)
				deposits, retryWins, granted := 0, 0, 0
				pFail := rapid.Float64Range(0, 1).Draw(t, "failure rate")
				for i, n := 0, rapid.IntRange(1, 3000).Draw(t, "calls"); i < n; i++ {
					// One call of up to 4 attempts, as Do makes it.
					for attempt := 1; attempt <= 4; attempt++ {
						failed := rapid.Float64Range(0, 1).Draw(t, "draw") < pFail
						var err error
						if failed {
							err = errDown
							if attempt%3 == 0 {
								err = errSlow
							}
						}
						r.Record(attempt > 1, err)
						if !failed {
							if attempt == 1 {
								deposits++
							} else {
								retryWins++
							}
							break
						}
						if attempt == 4 || !r.Withdraw(err) {
							break
						}
						granted++
						if b := tc.bound(deposits, retryWins); float64(granted) > b+1e-9 {
							t.Fatalf("granted %d retries, bound %v (deposits %d, successful retries %d)", granted, b, deposits, retryWins)
						}
					}
				}
			})
		})
	}
}

func TestWindowProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := clocktest.NewFake()
		cfg := budget.WindowConfig{
			Window:              time.Duration(rapid.IntRange(1, 30_000).Draw(t, "window ms")) * time.Millisecond,
			Buckets:             rapid.IntRange(0, 20).Draw(t, "Buckets"),
			Ratio:               milli(t, -100, 1000, "Ratio"), // a fraction, at most MaxRatio
			MinRetriesPerSecond: milli(t, -1000, 20_000, "MinRetriesPerSecond"),
			Clock:               clk,
		}
		w := budget.NewWindow(cfg)
		start := clk.Now()

		// The documented meaning of the fields.
		buckets := int64(cfg.Buckets)
		if buckets == 0 {
			buckets = 10
		}
		width := cfg.Window / time.Duration(buckets)
		percent := micro(cfg.Ratio)
		switch {
		case cfg.Ratio == 0:
			percent = unit / 5
		case cfg.Ratio < 0:
			percent = 0
		}
		perSecond := cfg.MinRetriesPerSecond
		switch {
		case perSecond == 0:
			perSecond = 10
		case perSecond < 0:
			perSecond = 0
		}
		floor := micro(perSecond * cfg.Window.Seconds())

		var requests, grants []time.Duration // when each happened, since start
		var want budget.Stats
		now := func() time.Duration { return clk.Now().Sub(start) }
		// inWindow counts the events in the buckets [n-buckets+1, n].
		inWindow := func(events []time.Duration, n int64) (k int64) {
			for _, e := range events {
				if b := int64(e / width); b > n-buckets && b <= n {
					k++
				}
			}
			return k
		}
		// inSpan counts the events in (t-d, t].
		inSpan := func(events []time.Duration, t, d time.Duration) (k int64) {
			for _, e := range events {
				if e > t-d && e <= t {
					k++
				}
			}
			return k
		}
		headroom := func() int64 {
			n := int64(now() / width)
			return percent*inWindow(requests, n) + floor - inWindow(grants, n)*unit
		}

		steps(t, map[string]func(*rapid.T){
			"request": func(t *rapid.T) {
				var err error
				if rapid.Bool().Draw(t, "failed") {
					err = errDown
				}
				w.Record(false, err)
				requests = append(requests, now())
				want.Requests++
				want.Deposits++
			},
			"retry attempt": func(t *rapid.T) {
				w.Record(true, errDown)
				want.Retries++
			},
			"withdraw": func(t *rapid.T) {
				wantOK := headroom() >= unit
				if got := w.Withdraw(errDown); got != wantOK {
					t.Fatalf("Withdraw at %v = %v, model headroom %d µretries", now(), got, headroom())
				}
				if !wantOK {
					want.Refused++
					return
				}
				want.Granted++
				at := now()
				grants = append(grants, at)
				// The definition: retries ≤ Ratio × requests + floor within the
				// window, both by buckets and in plain time.
				n := int64(at / width)
				if g, r := inWindow(grants, n), inWindow(requests, n); g*unit > percent*r+floor {
					t.Fatalf("%d retries granted in the window for %d requests", g, r)
				}
				span := width * time.Duration(buckets)
				if g, r := inSpan(grants, at, span-width), inSpan(requests, at, span); g*unit > percent*r+floor {
					t.Fatalf("%d retries granted in (%v, %v] for %d requests in (%v, %v]", g, at-span+width, at, r, at-span, at)
				}
			},
			"time passes": func(t *rapid.T) {
				var d time.Duration
				switch rapid.IntRange(0, 2).Draw(t, "step kind") {
				case 0: // within a bucket
					d = time.Duration(rapid.Int64Range(0, int64(width)).Draw(t, "step"))
				case 1: // to a bucket edge
					d = width*time.Duration(rapid.IntRange(1, int(buckets)+1).Draw(t, "buckets")) - now()%width
				default: // anything up to two windows
					d = time.Duration(rapid.Int64Range(0, 2*int64(cfg.Window)).Draw(t, "step"))
				}
				clk.Advance(d)
			},
			"": func(t *rapid.T) {
				if got, want := w.Available(), float64(max(headroom(), 0)/unit); got != want {
					t.Fatalf("Available() = %v, model %v", got, want)
				}
				if s := w.Stats(); s != want {
					t.Fatalf("Stats() = %+v, want %+v", s, want)
				}
			},
		})
	})
}

func TestConcurrencyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := budget.ConcurrencyConfig{
			Ratio:          milli(t, -100, 1000, "Ratio"),
			MinConcurrency: rapid.IntRange(-1, 8).Draw(t, "MinConcurrency"),
		}
		c := budget.NewConcurrency(cfg)
		percent := micro(cfg.Ratio)
		switch {
		case cfg.Ratio == 0:
			percent = unit / 5
		case cfg.Ratio < 0:
			percent = 0
		}
		minimum := int64(cfg.MinConcurrency)
		switch {
		case minimum == 0:
			minimum = 3
		case minimum < 0:
			minimum = 0
		}

		var firsts, retries, waiting int64 // attempts running, granted retries waiting
		var want budget.Stats
		limit := func() int64 { return max(minimum, percent*(firsts+retries)/unit) }
		withdraw := func(t *rapid.T) {
			active := retries + waiting
			wantOK := active < limit()
			if got := c.Withdraw(errDown); got != wantOK {
				t.Fatalf("Withdraw = %v with %d retries active, limit %d", got, active, limit())
			}
			if !wantOK {
				want.Refused++
				return
			}
			want.Granted++
			waiting++
			// The definition: active retries ≤ max(MinConcurrency, Ratio × active requests).
			if a := float64(retries + waiting); a > max(float64(minimum), float64(percent)/unit*float64(firsts+retries)) {
				t.Fatalf("%v retries active for %d requests", a, firsts+retries)
			}
		}
		end := func(t *rapid.T, isRetry bool) {
			ok := rapid.Bool().Draw(t, "ok")
			var err error
			if !ok {
				err = errDown
			}
			c.Record(isRetry, err)
			if !ok && rapid.Bool().Draw(t, "ask") {
				withdraw(t)
			}
		}
		steps(t, map[string]func(*rapid.T){
			"first attempt starts": func(t *rapid.T) {
				c.Start(false)
				firsts++
			},
			"first attempt ends": func(t *rapid.T) {
				if firsts == 0 {
					return // not applicable now
				}
				firsts--
				want.Requests++
				end(t, false)
			},
			"retry starts": func(t *rapid.T) {
				if waiting == 0 {
					return // not applicable now
				}
				c.Start(true)
				waiting--
				retries++
			},
			"retry ends": func(t *rapid.T) {
				if retries == 0 {
					return // not applicable now
				}
				retries--
				want.Retries++
				end(t, true)
			},
			"retry abandoned": func(t *rapid.T) {
				if waiting == 0 {
					return // not applicable now
				}
				c.Refund()
				waiting--
				want.Refunded++
			},
			"": func(t *rapid.T) {
				req, ret := c.Active()
				if req != firsts+retries || ret != retries+waiting {
					t.Fatalf("Active() = %d, %d; want %d, %d", req, ret, firsts+retries, retries+waiting)
				}
				if got, want := c.Available(), float64(max(limit()-retries-waiting, 0)); got != want {
					t.Fatalf("Available() = %v, want %v", got, want)
				}
				if s := c.Stats(); s != want {
					t.Fatalf("Stats() = %+v, want %+v", s, want)
				}
			},
		})
	})
}

// steps runs between 1 and 1000 actions drawn from actions, then the
// invariant check actions[""] after each. (rapid's own Repeat runs a fixed,
// smaller number of steps; long sequences matter here, for windows to
// rotate and buckets to fill.) An action that does not apply in the current
// state returns without doing anything.
func steps(t *rapid.T, actions map[string]func(*rapid.T)) {
	check := actions[""]
	var names []string
	for name := range actions {
		if name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	pick := rapid.SampledFrom(names)
	check(t)
	for range rapid.IntRange(1, 1000).Draw(t, "steps") {
		actions[pick.Draw(t, "action")](t)
		check(t)
	}
}
