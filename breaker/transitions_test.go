package breaker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
)

type op uint8

const (
	opOK      op = iota // a successful call
	opFail              // a failed call
	opCancel            // a call ended by the caller's cancellation
	opPerm              // a call rejected permanently by the downstream
	opTimeout           // a call cut by its attempt timeout
	opAdvance           // time passes
)

// step is one action of a transition table and the state expected after it.
type step struct {
	op     op
	d      time.Duration // opAdvance
	refuse error         // for calls: the error Allow must return (nil: admitted)
	want   State
}

func errFor(o op) error {
	switch o {
	case opFail:
		return errDown
	case opCancel:
		return fmt.Errorf("call: %w", context.Canceled)
	case opPerm:
		return retry.Permanent(errors.New("404 not found"))
	case opTimeout:
		return fmt.Errorf("attempt: %w", retry.ErrAttemptTimeout)
	}
	return nil
}

func runSteps(t *testing.T, b *Breaker, fc interface{ Advance(time.Duration) }, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.op == opAdvance {
			fc.Advance(s.d)
		} else {
			done, err := b.Allow()
			if !errors.Is(err, s.refuse) || (err == nil) != (s.refuse == nil) {
				t.Fatalf("step %d: Allow() error = %v, want %v", i, err, s.refuse)
			}
			if err == nil {
				done(errFor(s.op))
			}
		}
		if got := b.State(); got != s.want {
			t.Fatalf("step %d: state = %v, want %v", i, got, s.want)
		}
	}
}

func TestTransitions(t *testing.T) {
	trip3 := []step{{op: opFail, want: Closed}, {op: opFail, want: Closed}, {op: opFail, want: Open}}
	cases := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"zero config trips after five failures", Config{}, []step{
			{op: opFail, want: Closed}, {op: opFail, want: Closed}, {op: opFail, want: Closed},
			{op: opFail, want: Closed}, {op: opFail, want: Open},
			{op: opOK, refuse: ErrOpen, want: Open},
		}},
		{"open refuses until the open timeout", Config{ConsecutiveFailures: 3}, append(trip3,
			step{op: opAdvance, d: DefaultOpenTimeout - time.Nanosecond, want: Open},
			step{op: opOK, refuse: ErrOpen, want: Open},
			step{op: opAdvance, d: time.Nanosecond, want: HalfOpen},
		)},
		{"a success resets the run of failures", Config{ConsecutiveFailures: 3}, []step{
			{op: opFail, want: Closed}, {op: opFail, want: Closed}, {op: opOK, want: Closed},
			{op: opFail, want: Closed}, {op: opFail, want: Closed}, {op: opFail, want: Open},
		}},
		{"cancellation is not counted, a permanent error is a success", Config{ConsecutiveFailures: 3}, []step{
			{op: opFail, want: Closed}, {op: opFail, want: Closed}, {op: opCancel, want: Closed},
			{op: opPerm, want: Closed}, {op: opFail, want: Closed}, {op: opFail, want: Closed},
			{op: opCancel, want: Closed}, {op: opFail, want: Open},
		}},
		{"attempt timeouts are failures", Config{ConsecutiveFailures: 2}, []step{
			{op: opTimeout, want: Closed}, {op: opTimeout, want: Open},
		}},
		{"half-open success closes", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opOK, want: Closed},
			step{op: opFail, want: Closed},
		)},
		{"half-open failure reopens", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opFail, want: Open},
			step{op: opOK, refuse: ErrOpen, want: Open},
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opOK, want: Closed},
		)},
		{"half-open attempt timeout reopens", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opTimeout, want: Open},
		)},
		{"half-open needs SuccessThreshold successes", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, SuccessThreshold: 3}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opOK, want: HalfOpen},
			step{op: opCancel, want: HalfOpen},
			step{op: opOK, want: HalfOpen},
			step{op: opPerm, want: Closed},
		)},
		{"half-open excluded probe decides nothing", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opCancel, want: HalfOpen},
			step{op: opCancel, want: HalfOpen},
			step{op: opOK, want: Closed},
		)},
		{"closing starts a fresh run", Config{ConsecutiveFailures: 3, OpenTimeout: time.Second}, append(trip3,
			step{op: opAdvance, d: time.Second, want: HalfOpen},
			step{op: opOK, want: Closed},
			step{op: opFail, want: Closed}, step{op: opFail, want: Closed}, step{op: opFail, want: Open},
		)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, fc := newTest(t, tc.cfg)
			runSteps(t, b, fc, tc.steps)
		})
	}
}

// openNow trips b with failures of the consecutive condition.
func openNow(t *testing.T, b *Breaker) {
	t.Helper()
	for b.State() == Closed {
		mustCall(t, b, errDown)
	}
	wantState(t, b, Open)
}

func TestProbeLimit(t *testing.T) {
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, MaxProbes: 2, SuccessThreshold: 3})
	openNow(t, b)
	if err := b.Ready(); err != ErrOpen {
		t.Fatalf("Ready() when open = %v, want ErrOpen", err)
	}
	fc.Advance(DefaultOpenTimeout)
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready() when half-open = %v, want nil", err)
	}
	d1, err1 := b.Allow()
	d2, err2 := b.Allow()
	if err1 != nil || err2 != nil {
		t.Fatalf("Allow() in half-open = %v, %v; want two probes admitted", err1, err2)
	}
	if _, err := b.Allow(); err != ErrTooManyProbes {
		t.Fatalf("third Allow() = %v, want ErrTooManyProbes", err)
	}
	if err := b.Ready(); err != ErrTooManyProbes {
		t.Fatalf("Ready() with all probes out = %v, want ErrTooManyProbes", err)
	}
	if got := b.Counts(); got.Requests != 0 {
		t.Fatalf("Counts().Requests = %d with both probes in flight, want 0", got.Requests)
	}
	d1(nil)
	d1(nil) // ignored: a probe slot is released once
	d3, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow() after a probe ended = %v", err)
	}
	if _, err := b.Allow(); err != ErrTooManyProbes {
		t.Fatalf("Allow() = %v, want ErrTooManyProbes (a repeated done must not free a slot)", err)
	}
	if c := b.Counts(); c.Requests != 1 || c.Successes != 1 || c.ConsecutiveSuccesses != 1 {
		t.Fatalf("Counts() = %+v, want one success", c)
	}
	d2(nil)
	d3(nil)
	wantState(t, b, Closed)
}

func TestStaleResultsAreIgnored(t *testing.T) {
	t.Run("closed result after the trip", func(t *testing.T) {
		b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second})
		late, _ := b.Allow()
		later, _ := b.Allow()
		gen := b.Generation()
		mustCall(t, b, errDown)
		if b.Generation() != gen+1 {
			t.Fatalf("generation = %d after a trip from %d", b.Generation(), gen)
		}
		until := b.cur.Load().until
		fc.Advance(time.Millisecond)
		late(errDown) // must not restart the open period
		if b.cur.Load().until != until {
			t.Fatal("a stale failure restarted the open period")
		}
		fc.Advance(time.Second)
		wantState(t, b, HalfOpen)
		later(nil) // must not count as the probe's success
		wantState(t, b, HalfOpen)
		if c := b.Counts(); c.Successes != 0 {
			t.Fatalf("Counts() = %+v after a stale success", c)
		}
	})
	t.Run("closed failure in a later closed generation", func(t *testing.T) {
		for _, cfg := range []Config{
			{ConsecutiveFailures: 1, OpenTimeout: time.Second},
			{Window: Window{Calls: 1, FailureRatio: 1}, OpenTimeout: time.Second},
			{Window: Window{Duration: time.Minute, MinCalls: 1}, OpenTimeout: time.Second},
			{ReadyToTrip: func(c Counts) bool { return c.Failures > 0 }, OpenTimeout: time.Second},
			{ConsecutiveFailures: 1, Window: Window{}, OpenTimeout: time.Second, Probe: func(context.Context) error { return nil }},
		} {
			b, fc := newTest(t, cfg)
			late, _ := b.Allow()
			mustCall(t, b, errDown)
			wantState(t, b, Open)
			fc.Advance(time.Second)
			mustCall(t, b, nil)
			wantState(t, b, Closed)
			late(errDown)
			wantState(t, b, Closed)
		}
	})
	t.Run("probe of an earlier half-open generation", func(t *testing.T) {
		b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxProbes: 2, SuccessThreshold: 1})
		openNow(t, b)
		fc.Advance(time.Second)
		p1, _ := b.Allow()
		p2, _ := b.Allow()
		p1(errDown)
		wantState(t, b, Open)
		fc.Advance(time.Second)
		wantState(t, b, HalfOpen)
		p2(nil) // stale: must neither close the breaker nor free a slot of this generation
		wantState(t, b, HalfOpen)
		q1, err1 := b.Allow()
		q2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("new generation admitted %v, %v; want two probes", err1, err2)
		}
		q1(context.Canceled)
		q2(nil)
		wantState(t, b, Closed)
	})
	t.Run("repeated done of a pooled record", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: Window{Calls: 2, SlowCallDuration: time.Second, FailureRatio: 0.5}})
		d, _ := b.Allow()
		fc.Advance(2 * time.Second)
		d(nil)
		d(errDown)
		if c := b.Counts(); c.Successes != 1 || c.Failures != 0 || c.SlowCalls != 1 {
			t.Fatalf("Counts() = %+v, want the one slow success only", c)
		}
	})
}

func TestGeneration(t *testing.T) {
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second})
	if g := b.Generation(); g != 0 {
		t.Fatalf("initial generation %d", g)
	}
	mustCall(t, b, errDown) // open: 1
	fc.Advance(time.Second) // half-open: 2
	mustCall(t, b, errDown) // open: 3
	fc.Advance(time.Second) // half-open: 4
	mustCall(t, b, nil)     // closed: 5
	if g := b.Generation(); g != 5 {
		t.Fatalf("generation %d after five changes", g)
	}
}

func TestListeners(t *testing.T) {
	var cfgRec, subRec, gone recorder
	var b *Breaker
	var fc interface{ Advance(time.Duration) }
	cfg := Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OnStateChange: func(from, to State) {
		cfgRec.listen(from, to)
		_ = b.State()  // listeners run outside the lock:
		_ = b.Counts() // calling back must not deadlock
		if to == HalfOpen {
			mustCall(t, b, nil) // a change caused by a listener comes after this one
		}
	}}
	b, fc = newTest(t, cfg)
	b.Subscribe(subRec.listen)
	unsub := b.Subscribe(gone.listen)
	mustCall(t, b, errDown)
	unsub()
	unsub()
	fc.Advance(time.Second)
	wantState(t, b, Closed)
	want := "closed->open open->half-open half-open->closed"
	if got := strings.Join(cfgRec.got, " "); got != want {
		t.Errorf("OnStateChange saw %q, want %q", got, want)
	}
	if got := strings.Join(subRec.got, " "); got != want {
		t.Errorf("Subscribe listener saw %q, want %q", got, want)
	}
	if got := strings.Join(gone.got, " "); got != "closed->open" {
		t.Errorf("unsubscribed listener saw %q, want only the first change", got)
	}
}

func TestListenerPanicDoesNotWedgeDelivery(t *testing.T) {
	var rec recorder
	panicked := false
	b, fc := newTest(t, Config{ConsecutiveFailures: 1, OpenTimeout: time.Second})
	b.Subscribe(func(from, to State) {
		if !panicked {
			panicked = true
			panic("listener bug")
		}
	})
	b.Subscribe(rec.listen)
	func() {
		defer func() { _ = recover() }()
		mustCall(t, b, errDown)
	}()
	wantState(t, b, Open)
	fc.Advance(time.Second)
	wantState(t, b, HalfOpen)
	// The other listener heard the change the panicking one did not
	// survive, and the next one.
	if got := strings.Join(rec.got, " "); got != "closed->open open->half-open" {
		t.Fatalf("after a listener panic, listeners saw %q", got)
	}
}

func TestNilBreaker(t *testing.T) {
	var b *Breaker
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errDown)
	if b.Ready() != nil || b.State() != Closed || b.Generation() != 0 || b.Counts() != (Counts{}) {
		t.Fatal("nil breaker is not an always-closed breaker")
	}
	b.Subscribe(func(State, State) {})()
	b.Close()
	v, err := Do(context.Background(), b, func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("Do with nil breaker = %v, %v", v, err)
	}
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	t.Run("records the result", func(t *testing.T) {
		b, _ := newTest(t, Config{ConsecutiveFailures: 2})
		for range 2 {
			if _, err := Do(ctx, b, func(context.Context) (int, error) { return 0, errDown }); err != errDown {
				t.Fatalf("Do returned %v, want the function's error", err)
			}
		}
		called := false
		_, err := Do(ctx, b, func(context.Context) (int, error) { called = true; return 1, nil })
		if !errors.Is(err, ErrOpen) || called {
			t.Fatalf("Do on an open breaker = %v (called %v), want ErrOpen without a call", err, called)
		}
	})
	t.Run("a panic counts as a failure", func(t *testing.T) {
		b, _ := newTest(t, Config{ConsecutiveFailures: 1})
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the function's panic", r)
				}
			}()
			_, _ = Do(ctx, b, func(context.Context) (int, error) { panic("boom") })
		}()
		wantState(t, b, Open)
	})
	t.Run("a cancelled context takes no probe slot", func(t *testing.T) {
		b, fc := newTest(t, Config{ConsecutiveFailures: 1})
		openNow(t, b)
		fc.Advance(DefaultOpenTimeout)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Do(cctx, b, func(context.Context) (int, error) { return 1, nil }); err != context.Canceled {
			t.Fatalf("Do with a cancelled context = %v", err)
		}
		if err := b.Ready(); err != nil {
			t.Fatalf("Ready() = %v: the cancelled Do held a probe slot", err)
		}
	})
}

func TestClassificationHooks(t *testing.T) {
	errBusy := errors.New("busy")
	b, _ := newTest(t, Config{
		ConsecutiveFailures: 2,
		IsFailure:           func(err error) bool { return err != errBusy },
		IsExcluded:          func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
	})
	mustCall(t, b, errDown)
	mustCall(t, b, context.DeadlineExceeded) // excluded: run goes on
	wantState(t, b, Closed)
	mustCall(t, b, errBusy) // a success: run ends
	mustCall(t, b, errDown)
	wantState(t, b, Closed)
	mustCall(t, b, errDown)
	wantState(t, b, Open)
}

func TestDefaultClassification(t *testing.T) {
	cases := []struct {
		err               error
		failure, excluded bool
	}{
		{nil, false, false},
		{errDown, true, false},
		{retry.Permanent(errDown), false, false},
		{context.Canceled, false, true},
		{fmt.Errorf("wrapped: %w", context.Canceled), false, true},
		{context.DeadlineExceeded, true, false},
		{fmt.Errorf("attempt: %w", retry.ErrAttemptTimeout), true, false},
		{errors.Join(context.Canceled, retry.ErrAttemptTimeout), true, false},
	}
	for _, c := range cases {
		if got := DefaultIsFailure(c.err); got != c.failure {
			t.Errorf("DefaultIsFailure(%v) = %v, want %v", c.err, got, c.failure)
		}
		if got := DefaultIsExcluded(c.err); got != c.excluded {
			t.Errorf("DefaultIsExcluded(%v) = %v, want %v", c.err, got, c.excluded)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Closed: "closed", HalfOpen: "half-open", Open: "open", 7: "state(7)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
	if Closed != 0 || HalfOpen != 1 || Open != 2 {
		t.Error("state values must match the stormguard_breaker_state metric")
	}
	if ErrOpen.Error() != "breaker: open" || ErrTooManyProbes.Error() != "breaker: too many probes" {
		t.Error("error messages changed")
	}
}
