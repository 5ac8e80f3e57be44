package breaker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// readCounter is a fake clock that counts reads of the time.
type readCounter struct {
	*clocktest.Fake
	reads atomic.Int64
}

func (c *readCounter) Now() time.Time                  { c.reads.Add(1); return c.Fake.Now() }
func (c *readCounter) Since(t time.Time) time.Duration { c.reads.Add(1); return c.Fake.Since(t) }

// newGated returns a breaker whose open periods end by a timer, as on the
// real clock, on a fake clock that counts reads.
func newGated(t *testing.T, cfg Config) (*Breaker, *readCounter) {
	t.Helper()
	rc := &readCounter{Fake: clocktest.NewFake()}
	cfg.Clock = rc
	if cfg.OpenJitter == 0 {
		cfg.OpenJitter = -1
	}
	b := newBreaker(cfg, true)
	t.Cleanup(b.Close)
	return b, rc
}

// On the real clock a refusal by an open breaker reads no clock: the end
// of the open period is marked by a timer, which on a fake clock fires at
// the exact end, so that the breaker admits a probe exactly when the
// period is over, as when every refusal reads the clock.
func TestOpenRefusalReadsNoClock(t *testing.T) {
	b, rc := newGated(t, Config{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second})
	if !New(Config{}).gate {
		t.Fatal("a breaker on the real clock is not gated")
	}
	mustCall(t, b, errDown)
	rc.reads.Store(0)
	for range 3 {
		if _, err := b.Allow(); err != ErrOpen {
			t.Fatalf("Allow = %v, want ErrOpen", err)
		}
	}
	if b.Ready() != ErrOpen || b.State() != Open {
		t.Fatalf("Ready = %v, State = %v", b.Ready(), b.State())
	}
	if n := rc.reads.Load(); n != 0 {
		t.Fatalf("refusals read the clock %d times, want 0", n)
	}
	rc.Advance(10*time.Second - 1)
	if _, err := b.Allow(); err != ErrOpen {
		t.Fatalf("1ns before the end: Allow = %v, want ErrOpen", err)
	}
	if n := rc.reads.Load(); n != 0 {
		t.Fatalf("refusals read the clock %d times, want 0", n)
	}
	rc.Advance(1)
	wantState(t, b, HalfOpen)
	mustCall(t, b, nil)
	wantState(t, b, Closed)
	if n := rc.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the open period", n)
	}
}

// With jitter and growing periods, a gated breaker's open periods end at
// the same instants as those of a breaker that reads the clock on every
// refusal, for the same random source.
func TestGatedOpenPeriodsMatchClockReads(t *testing.T) {
	cfg := Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxOpenTimeout: 30 * time.Second, OpenJitter: 0.5}
	cfg.Rand = rand.NewPCG(7, 9)
	gated, gc := newGated(t, cfg)
	cfg.Rand = rand.NewPCG(7, 9)
	plain, pc := newTest(t, cfg)
	if plain.gate {
		t.Fatal("a breaker on a fake clock is gated")
	}
	step := 37 * time.Millisecond
	for trip := range 6 {
		mustCall(t, gated, errDown)
		mustCall(t, plain, errDown)
		var endG, endP time.Duration
		for i := time.Duration(1); endG == 0 || endP == 0; i++ {
			if i > 10000 {
				t.Fatal("the open periods do not end")
			}
			gc.Advance(step)
			pc.Advance(step)
			if endG == 0 && gated.State() != Open {
				endG = i
			}
			if endP == 0 && plain.State() != Open {
				endP = i
			}
		}
		if endG != endP {
			t.Fatalf("trip %d: the gated period ended after %d steps, the other after %d", trip, endG, endP)
		}
		// a failed probe reopens both, with the next, longer period
	}
}

// An actively probed breaker closed (Close) while open ends the open
// period on time, also when gated.
func TestGatedCloseEndsProbedPeriod(t *testing.T) {
	b, rc := newGated(t, Config{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second,
		Probe: func(context.Context) error { return errors.New("still down") }})
	mustCall(t, b, errDown)
	b.Close()
	rc.Advance(10*time.Second - 1)
	wantState(t, b, Open)
	rc.Advance(1)
	wantState(t, b, HalfOpen)
}

// A Clock whose AfterFunc panics: the panic goes on, and the gated
// breaker reads the clock instead, so the open period still ends.
func TestGatedPanickingAfterFunc(t *testing.T) {
	pc := &panicAfterFunc{Fake: clocktest.NewFake()}
	b := newBreaker(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: pc}, true)
	t.Cleanup(b.Close)
	var r recorder
	b.Subscribe(r.listen)
	if v := mustPanic(t, func() { mustCall(t, b, errDown) }); v != "AfterFunc failed" {
		t.Fatalf("panic %v, want the clock's", v)
	}
	wantState(t, b, Open)
	if got := fmt.Sprint(r.got); got != "[closed->open]" {
		t.Fatalf("the listener heard %v before the clock's panic went on", got)
	}
	pc.Advance(time.Second)
	wantState(t, b, HalfOpen)
	if got := fmt.Sprint(r.got); got != "[closed->open open->half-open]" {
		t.Fatalf("the listener heard %v", got)
	}
}

type panicAfterFunc struct{ *clocktest.Fake }

func (*panicAfterFunc) AfterFunc(time.Duration, func()) clock.Timer { panic("AfterFunc failed") }

// On the real clock the open period ends by its timer: the breaker admits
// a probe once it has fired.
func TestOpenPeriodEndsOnRealClock(t *testing.T) {
	b := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Millisecond, OpenJitter: -1})
	t.Cleanup(b.Close)
	mustCall(t, b, errDown)
	limit := time.Now().Add(time.Minute) // only against a hang
	for b.State() == Open {              // the timer fires after 1ms of real time
		if time.Now().After(limit) {
			t.Fatal("the open period did not end")
		}
		runtime.Gosched()
	}
	mustCall(t, b, nil)
	wantState(t, b, Closed)
}

// A Clock whose AfterFunc panics when the probe timer is to be started:
// the panic goes on, and the open period ends on time, as without a Probe,
// on either kind of clock.
func TestProbeTimerPanicEndsPeriodOnTime(t *testing.T) {
	for _, gate := range []bool{false, true} {
		pc := &panicAfterFunc{Fake: clocktest.NewFake()}
		b := newBreaker(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: pc,
			Probe: func(context.Context) error { return nil }}, gate)
		if v := mustPanic(t, func() { mustCall(t, b, errDown) }); v != "AfterFunc failed" {
			t.Fatalf("gate %v: panic %v, want the clock's", gate, v)
		}
		wantState(t, b, Open)
		pc.Advance(time.Second - 1)
		wantState(t, b, Open)
		pc.Advance(1)
		wantState(t, b, HalfOpen)
		b.Close()
	}
}
