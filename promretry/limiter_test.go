package promretry_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

var errBusy error = &httpretry.StatusError{StatusCode: http.StatusServiceUnavailable}

// TestWatchLimiterSRE drives real calls through a real SRE throttler and
// scrapes a real registry: the rejection probability gauge is the
// throttler's, the local rejections counter counts exactly the calls that
// ended with reason "throttled", and both join the call metrics on
// operation.
func TestWatchLimiterSRE(t *testing.T) {
	clk := clocktest.NewFake()
	sre := throttle.NewSRE(throttle.SREConfig{K: 1.1, MinRequests: -1, Clock: clk, Rand: backoff.NewSource(7)})
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	defer c.WatchLimiter("get-user", sre)()
	p := newPolicy("get-user", clk, c)
	p.Limiter = sre
	p.MaxAttempts = 1
	const calls = 200
	var throttled int
	for i := range calls {
		err := retry.Run(context.Background(), p, func(context.Context) error {
			if i%4 == 0 {
				return nil // one in four accepted
			}
			return errBusy
		})
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	st := sre.Stats()
	if throttled == 0 || uint64(throttled) != st.Rejected {
		t.Fatalf("%d calls throttled, the SRE counted %d rejections: the test needs some", throttled, st.Rejected)
	}
	if got := value(t, reg, "stormguard_calls_total", "operation", "get-user", "outcome", "throttled"); got != float64(throttled) {
		t.Errorf("calls_total{outcome=throttled} = %v, want %d", got, throttled)
	}
	if got := value(t, reg, "stormguard_throttle_local_rejections_total", "operation", "get-user"); got != float64(throttled) {
		t.Errorf("local_rejections_total = %v, want %d", got, throttled)
	}
	got := value(t, reg, "stormguard_throttle_rejection_probability", "operation", "get-user")
	if want := sre.RejectionProbability(); got != want || got <= 0 || got >= 1 {
		t.Errorf("rejection_probability = %v, want the SRE's %v, in (0, 1)", got, want)
	}
	if find(t, reg, "stormguard_adaptive_fill_rate") != nil {
		t.Error("an SRE exported adaptive series")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
}

// TestWatchLimiterReplacedKeepsCounting: when a reload gives the operation
// a new throttler, the local rejections counter goes on from the old one's
// count (it never goes back), and it stays after the watch ends, while the
// probability gauge goes with the limiter.
func TestWatchLimiterReplacedKeepsCounting(t *testing.T) {
	clk := clocktest.NewFake()
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	reject := func(sre *throttle.SRE, n int) {
		for range n {
			if done, err := sre.Acquire(context.Background(), false); err == nil {
				done(errBusy)
			}
		}
	}
	old := throttle.NewSRE(throttle.SREConfig{MinRequests: -1, Clock: clk, Rand: backoff.NewSource(1)})
	unOld := c.WatchLimiter("op", old)
	reject(old, 100)
	first := old.Stats().Rejected
	if first == 0 {
		t.Fatal("no rejections")
	}
	fresh := throttle.NewSRE(throttle.SREConfig{MinRequests: -1, Clock: clk, Rand: backoff.NewSource(2)})
	unFresh := c.WatchLimiter("op", fresh) // config watches the new one first
	if got := value(t, reg, "stormguard_throttle_local_rejections_total", "operation", "op"); got != float64(first) {
		t.Fatalf("after the replacement: %v, want the old count %d", got, first)
	}
	unOld() // and then unwatches the old one: no effect, it is no longer current
	reject(fresh, 100)
	total := first + fresh.Stats().Rejected
	if got := value(t, reg, "stormguard_throttle_local_rejections_total", "operation", "op"); got != float64(total) {
		t.Fatalf("counter %v, want %d", got, total)
	}
	if got := value(t, reg, "stormguard_throttle_rejection_probability", "operation", "op"); got != fresh.RejectionProbability() {
		t.Fatalf("gauge %v, want the new throttler's %v", got, fresh.RejectionProbability())
	}
	unFresh()
	unFresh()
	if got := value(t, reg, "stormguard_throttle_local_rejections_total", "operation", "op"); got != float64(total) {
		t.Fatalf("after unwatch: counter %v, want %d", got, total)
	}
	if find(t, reg, "stormguard_throttle_rejection_probability") != nil {
		t.Fatal("the gauge outlived its limiter")
	}
}

// TestWatchLimiterAdaptive: a real AWS adaptive limiter, enabled by a
// throttling answer, exports its fill and measured rates, and counts an
// attempt that waited for its token and one refused for its deadline.
func TestWatchLimiterAdaptive(t *testing.T) {
	clk := clocktest.NewFakeAt(time.Unix(100, 0))
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	defer c.WatchLimiter("put-object", a)()
	answer := func(err error) {
		done, aerr := a.Acquire(context.Background(), false)
		if aerr != nil {
			t.Fatal(aerr)
		}
		done(err)
	}
	for range 20 { // 20 answers per second for a second
		clk.Advance(50 * time.Millisecond)
		answer(nil)
	}
	answer(errBusy) // the first throttle enables the bucket
	st := a.Stats()
	if !st.Enabled || st.Tokens >= 1 {
		t.Fatalf("not enabled: %+v", st)
	}
	if got := value(t, reg, "stormguard_adaptive_fill_rate", "operation", "put-object"); got != st.FillRate || got <= 0 {
		t.Errorf("fill_rate %v, want %v", got, st.FillRate)
	}
	if got := value(t, reg, "stormguard_adaptive_measured_rate", "operation", "put-object"); got != st.MeasuredRate || got <= 0 {
		t.Errorf("measured_rate %v, want %v", got, st.MeasuredRate)
	}
	// Refused: the wait for a token does not fit before a 1 ms deadline.
	ctx, cancel := clock.WithTimeout(context.Background(), clk, time.Millisecond, nil)
	defer cancel()
	if _, err := a.Acquire(ctx, true); !errors.Is(err, throttle.ErrWaitTooLong) {
		t.Fatalf("err %v, want ErrWaitTooLong", err)
	}
	// Waits: the attempt gets its token once the fake clock moves on.
	got := make(chan error, 1)
	go func() {
		done, err := a.Acquire(context.Background(), false)
		if err == nil {
			done(nil)
		}
		got <- err
	}()
	clk.BlockUntil(2) // the context's deadline and the wait
	clk.Advance(time.Duration(math.Ceil(1/st.FillRate*1e9)) + time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if v := value(t, reg, "stormguard_adaptive_waits_total", "operation", "put-object"); v != 1 {
		t.Errorf("waits_total %v, want 1", v)
	}
	if v := value(t, reg, "stormguard_adaptive_refused_total", "operation", "put-object"); v != 1 {
		t.Errorf("refused_total %v, want 1", v)
	}
	if find(t, reg, "stormguard_throttle_rejection_probability") != nil || find(t, reg, "stormguard_throttle_local_rejections_total") != nil {
		t.Error("an adaptive limiter exported SRE series")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
}

// probabilityOnly is a third-party limiter that tells only its rejection
// probability; plain tells nothing.
type probabilityOnly struct{ plain }

func (probabilityOnly) RejectionProbability() float64 { return 0.25 }

type plain struct{}

func (plain) Acquire(context.Context, bool) (func(error), error) { return func(error) {}, nil }

// TestWatchLimiterDegrades: any retry.Limiter may be watched; it exports
// what its interfaces tell, and nothing when it tells nothing.
func TestWatchLimiterDegrades(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	defer c.WatchLimiter("plain", plain{})()
	defer c.WatchLimiter("custom", probabilityOnly{})()
	c.WatchLimiter("nil", nil)()
	var nilC *promretry.Collector
	nilC.WatchLimiter("x", plain{})()
	const want = `
# HELP stormguard_throttle_rejection_probability Probability with which the client-side throttler (SRE adaptive throttling) rejects an attempt now, read at scrape time.
# TYPE stormguard_throttle_rejection_probability gauge
stormguard_throttle_rejection_probability{operation="custom"} 0.25
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stormguard_throttle_rejection_probability",
		"stormguard_throttle_local_rejections_total", "stormguard_adaptive_fill_rate", "stormguard_adaptive_waits_total"); err != nil {
		t.Fatal(err)
	}
}
