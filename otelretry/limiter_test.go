package otelretry_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

var errBusy error = &httpretry.StatusError{StatusCode: http.StatusServiceUnavailable}

func opAttr(op string) attribute.KeyValue { return attribute.String("operation", op) }

// TestWatchLimiterSRE drives real calls through a real SRE throttler and
// collects from an SDK reader: the rejection probability is the
// throttler's, and the local rejections equal the calls that ended with
// outcome "throttled".
func TestWatchLimiterSRE(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	sre := throttle.NewSRE(throttle.SREConfig{K: 1.1, MinRequests: -1, Clock: clk, Rand: backoff.NewSource(7)})
	defer h.obs.WatchLimiter("get-user", sre)()
	p := &retry.Policy{Operation: "get-user", MaxAttempts: 1, Limiter: sre, Clock: clk, Observer: h.obs}
	var throttled int
	for i := range 200 {
		err := retry.Run(context.Background(), p, func(context.Context) error {
			if i%4 == 0 {
				return nil
			}
			return errBusy
		})
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	if throttled == 0 || uint64(throttled) != sre.Stats().Rejected {
		t.Fatalf("%d calls throttled, the SRE counted %d", throttled, sre.Stats().Rejected)
	}
	if got := h.value(t, "stormguard.calls", opAttr("get-user"), attribute.String("outcome", "throttled")); got != float64(throttled) {
		t.Errorf("calls{outcome=throttled} = %v, want %d", got, throttled)
	}
	if got := h.value(t, "stormguard.throttle.local_rejections", opAttr("get-user")); got != float64(throttled) {
		t.Errorf("local_rejections = %v, want %d", got, throttled)
	}
	if got, want := h.value(t, "stormguard.throttle.rejection_probability", opAttr("get-user")), sre.RejectionProbability(); got != want || got <= 0 {
		t.Errorf("rejection_probability = %v, want %v", got, want)
	}
	if _, ok := h.point(t, "stormguard.adaptive.fill_rate"); ok {
		t.Error("an SRE reported adaptive metrics")
	}
}

// TestWatchLimiterReplacedKeepsCounting: a new throttler under the same
// operation continues the old one's count; the count stays after unwatch
// and the probability goes.
func TestWatchLimiterReplacedKeepsCounting(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	reject := func(sre *throttle.SRE) {
		for range 100 {
			if done, err := sre.Acquire(context.Background(), false); err == nil {
				done(errBusy)
			}
		}
	}
	old := throttle.NewSRE(throttle.SREConfig{MinRequests: -1, Clock: clk, Rand: backoff.NewSource(1)})
	unOld := h.obs.WatchLimiter("op", old)
	reject(old)
	first := old.Stats().Rejected
	fresh := throttle.NewSRE(throttle.SREConfig{MinRequests: -1, Clock: clk, Rand: backoff.NewSource(2)})
	unFresh := h.obs.WatchLimiter("op", fresh)
	unOld()
	if got := h.value(t, "stormguard.throttle.local_rejections", opAttr("op")); got != float64(first) || first == 0 {
		t.Fatalf("after the replacement %v, want %d", got, first)
	}
	reject(fresh)
	total := first + fresh.Stats().Rejected
	if got := h.value(t, "stormguard.throttle.local_rejections", opAttr("op")); got != float64(total) {
		t.Fatalf("%v, want %d", got, total)
	}
	unFresh()
	unFresh()
	if got := h.value(t, "stormguard.throttle.local_rejections", opAttr("op")); got != float64(total) {
		t.Fatalf("after unwatch %v, want %d", got, total)
	}
	if _, ok := h.point(t, "stormguard.throttle.rejection_probability"); ok {
		t.Fatal("the gauge outlived its limiter")
	}
}

// TestWatchLimiterAdaptive: a real AWS adaptive limiter reports its rates,
// a wait and a refusal.
func TestWatchLimiterAdaptive(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFakeAt(time.Unix(100, 0))
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	defer h.obs.WatchLimiter("put-object", a)()
	answer := func(err error) {
		done, aerr := a.Acquire(context.Background(), false)
		if aerr != nil {
			t.Fatal(aerr)
		}
		done(err)
	}
	for range 20 {
		clk.Advance(50 * time.Millisecond)
		answer(nil)
	}
	answer(errBusy)
	st := a.Stats()
	if got := h.value(t, "stormguard.adaptive.fill_rate", opAttr("put-object")); got != st.FillRate || got <= 0 {
		t.Errorf("fill_rate %v, want %v", got, st.FillRate)
	}
	if got := h.value(t, "stormguard.adaptive.measured_rate", opAttr("put-object")); got != st.MeasuredRate || got <= 0 {
		t.Errorf("measured_rate %v, want %v", got, st.MeasuredRate)
	}
	ctx, cancel := clock.WithTimeout(context.Background(), clk, time.Millisecond, nil)
	defer cancel()
	if _, err := a.Acquire(ctx, true); !errors.Is(err, throttle.ErrWaitTooLong) {
		t.Fatalf("err %v", err)
	}
	got := make(chan error, 1)
	go func() {
		done, err := a.Acquire(context.Background(), false)
		if err == nil {
			done(nil)
		}
		got <- err
	}()
	clk.BlockUntil(2)
	clk.Advance(time.Duration(math.Ceil(1/st.FillRate*1e9)) + time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if v := h.value(t, "stormguard.adaptive.waits", opAttr("put-object")); v != 1 {
		t.Errorf("waits %v, want 1", v)
	}
	if v := h.value(t, "stormguard.adaptive.refused", opAttr("put-object")); v != 1 {
		t.Errorf("refused %v, want 1", v)
	}
	if _, ok := h.point(t, "stormguard.throttle.local_rejections"); ok {
		t.Error("an adaptive limiter reported SRE metrics")
	}
}

type probabilityOnly struct{ plainLimiter }

func (probabilityOnly) RejectionProbability() float64 { return 0.25 }

type plainLimiter struct{}

func (plainLimiter) Acquire(context.Context, bool) (func(error), error) { return func(error) {}, nil }

// TestWatchLimiterDegrades: any retry.Limiter may be watched; it reports
// what its interfaces tell.
func TestWatchLimiterDegrades(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	defer h.obs.WatchLimiter("plain", plainLimiter{})()
	defer h.obs.WatchLimiter("custom", probabilityOnly{})()
	h.obs.WatchLimiter("nil", nil)()
	var nilObs *otelretry.Observer
	nilObs.WatchLimiter("x", plainLimiter{})()
	if v := h.value(t, "stormguard.throttle.rejection_probability", opAttr("custom")); v != 0.25 {
		t.Fatalf("probability %v", v)
	}
	if _, ok := h.point(t, "stormguard.throttle.rejection_probability", opAttr("plain")); ok {
		t.Fatal("a limiter without a probability reported one")
	}
	if _, ok := h.point(t, "stormguard.throttle.local_rejections"); ok {
		t.Fatal("counters without a ThrottleSource")
	}
}
