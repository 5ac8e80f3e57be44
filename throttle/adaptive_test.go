package throttle_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

func within(got, want, rel float64) bool {
	if want == 0 {
		return math.Abs(got) < 1e-9
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// TestAdaptiveReferenceTable replays aws-sdk-go-v2's
// TestAdaptiveRateLimit_Update table (aws/retry/adaptive_ratelimit_test.go):
// answers at the given instants, from a limiter made at Unix time 0, with
// the measured send rate and the fill rate expected after each. The
// acceptance bound is 1%; the values agree to 1e-9.
func TestAdaptiveReferenceTable(t *testing.T) {
	steps := []struct {
		ms                 int64
		throttled          bool
		measured, fillRate float64
	}{
		{200, false, 0, 0.5},
		{400, false, 0, 0.5},
		{600, false, 4.8, 0.5},
		{800, false, 4.8, 0.5},
		{1000, false, 4.16, 0.5},
		{1200, false, 4.16, 0.6912},
		{1400, false, 4.16, 1.0976},
		{1600, false, 5.632, 1.6384},
		{1800, false, 5.632, 2.3328},
		{2000, true, 4.3264, 3.02848},
		{2200, false, 4.3264, 3.4866391734702598},
		{2400, false, 4.3264, 3.8218744160402554},
		{2600, false, 5.665280, 4.053385727709987},
		{2800, false, 5.665280, 4.200373108479455},
		{3000, false, 4.333056, 4.282036558348658},
		{3200, true, 4.333056, 2.99742559084406},
		{3400, false, 4.333056, 3.4522263943863463},
	}
	clk := clocktest.NewFakeAt(time.Unix(0, 0))
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	for _, s := range steps {
		clk.Set(time.UnixMilli(s.ms))
		var err error
		if s.throttled {
			err = errOverload
		}
		a.Answer(err)
		st := a.Stats()
		if !within(st.MeasuredRate, s.measured, 1e-9) || !within(st.FillRate, s.fillRate, 1e-9) {
			t.Fatalf("at %d ms: measured %v fill %v, want %v %v", s.ms, st.MeasuredRate, st.FillRate, s.measured, s.fillRate)
		}
		if st.Enabled != (s.ms >= 2000) {
			t.Fatalf("at %d ms: enabled %v", s.ms, st.Enabled)
		}
	}
}

// enable makes a limiter whose bucket is in use and holds less than a
// token: one throttle after a second of 20 answers per second.
func enable(t *testing.T) (*throttle.Adaptive, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.NewFakeAt(time.Unix(100, 0))
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	for range 20 { // 10 answers per half second for a second
		clk.Advance(50 * time.Millisecond)
		a.Answer(nil)
	}
	a.Answer(errOverload)
	if st := a.Stats(); !st.Enabled || st.Tokens >= 1 || st.Tokens < 0 {
		t.Fatalf("after a throttle: %+v", st)
	}
	return a, clk
}

// TestAdaptiveWaits: once enabled, an attempt waits for its token, for as
// long as the fill rate says, on the limiter's clock.
func TestAdaptiveWaits(t *testing.T) {
	a, clk := enable(t)
	st := a.Stats()
	rate := st.FillRate
	want := time.Duration(math.Ceil((1 - st.Tokens) / rate * 1e9))
	got := make(chan error, 1)
	go func() {
		done, err := a.Acquire(context.Background(), false)
		if err == nil {
			done(nil)
		}
		got <- err
	}()
	clk.BlockUntil(1)
	if d := clk.Deadlines(); len(d) != 1 || d[0] != want {
		t.Fatalf("wait %v, want %v (1 token at %v/s)", d, want, rate)
	}
	clk.Advance(want)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Waits != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAdaptiveDeadline: a wait that cannot end before the deadline is
// refused at once, with an error that reads as the predictive stop.
func TestAdaptiveDeadline(t *testing.T) {
	a, clk := enable(t)
	before := a.Stats().Tokens
	ctx, cancel := clock.WithTimeout(context.Background(), clk, 10*time.Millisecond, nil)
	defer cancel()
	_, err := a.Acquire(ctx, true)
	if !errors.Is(err, throttle.ErrWaitTooLong) || !errors.Is(err, retry.ErrDeadlineTooClose) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrWaitTooLong matching ErrDeadlineTooClose and DeadlineExceeded", err)
	}
	if clk.Pending() != 1 { // the context's own deadline
		t.Fatal("a refused attempt left a timer")
	}
	if st := a.Stats(); st.Refused != 1 || st.Tokens != before {
		t.Fatalf("stats %+v: the refused attempt kept its token", st)
	}
	// Through retry.Do: the call stops with the limiter's error.
	_, err = retry.Do(ctx, &retry.Policy{Limiter: a, Clock: clk}, func(context.Context) (int, error) { return 1, nil })
	if !errors.Is(err, throttle.ErrWaitTooLong) {
		t.Fatalf("Do: %v", err)
	}
}

// TestAdaptiveCancel: a caller that gives up during the wait gets its
// context's error and gives its token back.
func TestAdaptiveCancel(t *testing.T) {
	a, clk := enable(t)
	before := a.Stats().Tokens
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctx, false)
		got <- err
	}()
	clk.BlockUntil(1)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if st := a.Stats(); math.Abs(st.Tokens-before) > 1e-12 {
		t.Fatalf("tokens %v after a cancelled wait, want %v", st.Tokens, before)
	}
}

// TestAdaptiveNotEnabled: before any throttle, attempts never wait.
func TestAdaptiveNotEnabled(t *testing.T) {
	clk := clocktest.NewFake()
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: clk})
	for range 1000 {
		done, err := a.Acquire(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		done(errPlain)
	}
	if st := a.Stats(); st.Enabled || st.Waits != 0 {
		t.Fatalf("stats %+v", st)
	}
	var n *throttle.Adaptive
	if done, err := n.Acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	} else {
		done(nil)
	}
}

func TestAdaptiveConfigValidate(t *testing.T) {
	bad := []throttle.AdaptiveConfig{
		{Beta: 1}, {Beta: -0.1}, {Beta: math.NaN()}, {ScaleConstant: -1}, {ScaleConstant: math.Inf(1)},
		{Smoothing: 1.5}, {MinFillRate: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, throttle.ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (throttle.AdaptiveConfig{Beta: 0.5, Smoothing: 1, MinFillRate: 2}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestAdaptiveAllocs: an attempt that gets its token at once and its
// answer allocate nothing.
func TestAdaptiveAllocs(t *testing.T) {
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		done, _ := a.Acquire(ctx, false)
		done(nil)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
