package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/throttle"
)

func formula(req, acc, k float64) float64 { return max(0, (req-k*acc)/(req+1)) }

// TestSREFormula drives a throttler through a fixed sequence and
// checks the probability and the decisions after every request.
func TestSREFormula(t *testing.T) {
	clk := clocktest.NewFake()
	src := &scripted{}
	th := throttle.NewSRE(throttle.SREConfig{Clock: clk, Rand: src})

	// 10 accepted requests: probability 0 throughout, no draw made.
	for range 10 {
		done, err := th.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(nil)
	}
	if s := th.Stats(); s.Requests != 10 || s.Accepts != 10 || s.Probability != 0 {
		t.Fatalf("after 10 successes: %+v", s)
	}
	// Overloads: requests grow, accepts stay at 10. Once requests exceed
	// 20 the throttler draws; a draw of 0.999 lets the request through.
	var req float64 = 10
	for i := range 30 {
		want := formula(req, 10, 2)
		if got := th.RejectionProbability(); math.Abs(got-want) > 1e-12 {
			t.Fatalf("request %d: probability %v, want %v", i, got, want)
		}
		if want > 0 {
			src.next(0.999)
		}
		done, err := th.Allow()
		if err != nil {
			t.Fatalf("request %d rejected with a draw of 0.999 at p=%v", i, want)
		}
		done(errOverload)
		req++
	}
	// p = (40-20)/41; a draw just below it rejects, just above it does not.
	p := formula(40, 10, 2)
	src.next(p - 1e-9)
	if _, err := th.Allow(); !errors.Is(err, throttle.ErrThrottled) {
		t.Fatalf("draw below p=%v: err %v, want ErrThrottled", p, err)
	}
	// The rejection counted as a request.
	p = formula(41, 10, 2)
	if s := th.Stats(); s.Requests != 41 || s.Rejected != 1 || math.Abs(s.Probability-p) > 1e-12 {
		t.Fatalf("after a rejection: %+v, want 41 requests, 1 rejected, p %v", s, p)
	}
	src.next(p + 1e-9)
	done, err := th.Allow()
	if err != nil {
		t.Fatalf("draw above p=%v: %v", p, err)
	}
	done(nil)
	if s := th.Stats(); s.Requests != 42 || s.Accepts != 11 {
		t.Fatalf("after a success: %+v", s)
	}
}

// TestSREWindow checks that counts leave the window with their
// bucket: 12 buckets of 10 s by default.
func TestSREWindow(t *testing.T) {
	clk := clocktest.NewFake()
	th := throttle.NewSRE(throttle.SREConfig{Clock: clk, Rand: backoff.NewSource(1)})
	overload := func(n int) {
		for range n {
			if done, err := th.Allow(); err == nil {
				done(errOverload)
			}
		}
	}
	overload(5) // slot 0
	clk.Advance(65 * time.Second)
	overload(7) // slot 6
	if s := th.Stats(); s.Requests != 12 {
		t.Fatalf("requests %d, want 12", s.Requests)
	}
	clk.Advance(55 * time.Second) // slot 12: slot 0 leaves the window
	if s := th.Stats(); s.Requests != 7 {
		t.Fatalf("after slot 0 left: requests %d, want 7", s.Requests)
	}
	clk.Advance(2 * time.Minute)
	if s := th.Stats(); s.Requests != 0 || s.Probability != 0 {
		t.Fatalf("after a quiet window: %+v", s)
	}
}

// TestSREClassification checks which answers count as accepted.
func TestSREClassification(t *testing.T) {
	status := func(code int) error { return &httpretry.StatusError{StatusCode: code} }
	cases := []struct {
		name     string
		err      error
		req, acc uint64
	}{
		{"success", nil, 1, 1},
		{"429", status(http.StatusTooManyRequests), 1, 0},
		{"503", status(http.StatusServiceUnavailable), 1, 0},
		{"wrapped 503", fmt.Errorf("call: %w", status(http.StatusServiceUnavailable)), 1, 0},
		{"500", status(http.StatusInternalServerError), 1, 1},
		{"404", status(http.StatusNotFound), 1, 1},
		{"reset", errPlain, 1, 1},
		{"caller canceled", context.Canceled, 1, 1},
		{"reporter yes", reporter(true), 1, 0},
		{"reporter no beats 503", fmt.Errorf("%w %w", reporter(false), status(503)), 1, 1},
		{"breaker open: never sent", breaker.ErrOpen, 0, 0},
		{"too many probes: never sent", breaker.ErrTooManyProbes, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake()})
			done, err := th.Allow()
			if err != nil {
				t.Fatal(err)
			}
			done(c.err)
			if s := th.Stats(); s.Requests != c.req || s.Accepts != c.acc {
				t.Fatalf("requests %d accepts %d, want %d %d", s.Requests, s.Accepts, c.req, c.acc)
			}
		})
	}
	t.Run("custom", func(t *testing.T) {
		th := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake(), Overload: func(err error) bool { return errors.Is(err, errPlain) }})
		done, _ := th.Allow()
		done(errOverload) // accepted by this classification
		done, err := th.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errPlain)
		if s := th.Stats(); s.Requests != 2 || s.Accepts != 1 {
			t.Fatalf("custom classification: %+v", s)
		}
	})
}

type reporter bool

func (r reporter) Error() string  { return "reporter" }
func (r reporter) Overload() bool { return bool(r) }

// TestSREMaxRejection: the cap holds when the formula is above it.
func TestSREMaxRejection(t *testing.T) {
	src := &scripted{}
	th := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake(), Rand: src, MaxRejection: 0.5, K: 1.1})
	for i := range 20 {
		if th.RejectionProbability() > 0 {
			src.next(0.5) // at the cap: not below it, so sent
		}
		done, err := th.Allow()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		done(errOverload)
	}
	if p := th.RejectionProbability(); p != 0.5 {
		t.Fatalf("probability %v, want the cap 0.5", p)
	}
}

func TestSRENil(t *testing.T) {
	var th *throttle.SRE
	done, err := th.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errOverload)
	if done, err = th.Acquire(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	done(nil)
	if th.RejectionProbability() != 0 || th.Stats() != (throttle.Stats{}) {
		t.Fatal("nil throttler reports something")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []throttle.SREConfig{
		{Window: -1}, {Buckets: -1}, {Buckets: throttle.MaxBuckets + 1}, {K: 0.5}, {K: math.NaN()},
		{K: math.Inf(1)}, {MaxRejection: -0.1}, {MaxRejection: 1.5}, {MaxRejection: math.NaN()},
		{Window: time.Millisecond, Buckets: 12},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, throttle.ErrInvalidConfig) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidConfig", c, err)
		}
	}
	good := []throttle.SREConfig{{}, {K: 1.1}, {K: 1}, {MaxRejection: 1}, {MaxRejection: 0.8}, {Window: time.Minute, Buckets: 60}}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New of a bad config did not panic")
		}
	}()
	throttle.NewSRE(throttle.SREConfig{K: 0.5})
}

// TestSREAllocs: Allow and done allocate nothing, throttled or not.
func TestSREAllocs(t *testing.T) {
	th := throttle.NewSRE(throttle.SREConfig{Rand: backoff.NewSource(1)})
	n := testing.AllocsPerRun(1000, func() {
		if done, err := th.Allow(); err == nil {
			done(errOverload)
		}
	})
	if n != 0 {
		t.Fatalf("Allow+done allocates %v per run", n)
	}
	if th.Stats().Rejected == 0 {
		t.Fatal("no rejection happened: the throttled path was not measured")
	}
}

// TestSREMinRequests: a cold client's concurrent first calls are counted
// before any answer; the floor lets them through, the bare formula does
// not.
func TestSREMinRequests(t *testing.T) {
	src := &scripted{}
	cold := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake(), Rand: src})
	for i := range throttle.DefaultMinRequests {
		if _, err := cold.Allow(); err != nil { // in flight: no done yet
			t.Fatalf("call %d of a cold start rejected: %v", i, err)
		}
	}
	if p := cold.RejectionProbability(); p != formula(throttle.DefaultMinRequests, 0, 2) {
		t.Fatalf("at the floor: p %v", p)
	}
	bare := throttle.NewSRE(throttle.SREConfig{Clock: clocktest.NewFake(), Rand: src, MinRequests: -1})
	bare.Allow()
	if p := bare.RejectionProbability(); p != 0.5 {
		t.Fatalf("bare formula, one call in flight: p %v, want 0.5", p)
	}
}
