package breaker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
)

// prober is a scripted active health check.
type prober struct {
	fc      *clocktest.Fake
	results []error       // the result of each probe in turn (then nil)
	take    time.Duration // how long each probe takes on the fake clock
	calls   []time.Time
	ctxErrs []error
	dl      []time.Time
}

func (p *prober) probe(ctx context.Context) error {
	p.calls = append(p.calls, p.fc.Now())
	dl, _ := ctx.Deadline()
	p.dl = append(p.dl, dl)
	if p.take > 0 {
		p.fc.Advance(p.take)
	}
	p.ctxErrs = append(p.ctxErrs, context.Cause(ctx))
	if n := len(p.calls); n <= len(p.results) {
		return p.results[n-1]
	}
	return nil
}

func newProbed(t *testing.T, cfg Config, p *prober) (*Breaker, *clocktest.Fake) {
	t.Helper()
	cfg.Probe = p.probe
	cfg.ConsecutiveFailures = 1
	b, fc := newTest(t, cfg)
	p.fc = fc
	return b, fc
}

func TestActiveProbe(t *testing.T) {
	t.Run("success moves to half-open before the period ends", func(t *testing.T) {
		p := &prober{}
		b, fc := newProbed(t, Config{OpenTimeout: 10 * time.Second}, p)
		start := fc.Now()
		mustCall(t, b, errDown)
		if got := fc.Deadlines(); len(got) != 1 || got[0] != 10*time.Second-DefaultProbeOffset {
			t.Fatalf("pending timers %v, want one probe timer at 9.9s", got)
		}
		fc.Advance(10*time.Second - DefaultProbeOffset - 1)
		if len(p.calls) != 0 {
			t.Fatal("probe ran early")
		}
		wantState(t, b, Open)
		fc.Advance(1)
		if len(p.calls) != 1 || !p.calls[0].Equal(start.Add(9900*time.Millisecond)) {
			t.Fatalf("probe calls at %v", p.calls)
		}
		if !p.dl[0].Equal(p.calls[0].Add(DefaultProbeTimeout)) {
			t.Fatalf("probe deadline %v, want ProbeTimeout after its start", p.dl[0])
		}
		wantState(t, b, HalfOpen)
		mustCall(t, b, nil)
		wantState(t, b, Closed)
		if fc.Pending() != 0 {
			t.Fatalf("%d timers left pending", fc.Pending())
		}
	})
	t.Run("failure restarts the open period, growing it", func(t *testing.T) {
		p := &prober{results: []error{errDown, errDown}}
		b, fc := newProbed(t, Config{OpenTimeout: 10 * time.Second, MaxOpenTimeout: time.Minute, ProbeOffset: time.Second}, p)
		var rec recorder
		b.Subscribe(rec.listen)
		start := fc.Now()
		mustCall(t, b, errDown)
		gen := b.Generation()
		fc.Advance(9 * time.Second) // first probe fails
		if len(p.calls) != 1 {
			t.Fatalf("%d probes", len(p.calls))
		}
		wantState(t, b, Open)
		if b.Generation() != gen+1 {
			t.Fatal("a failed probe did not start a new generation")
		}
		fc.Advance(2 * time.Second) // past the first period: still open
		wantState(t, b, Open)
		if _, err := b.Allow(); err != ErrOpen {
			t.Fatalf("Allow() = %v while probing keeps the breaker open", err)
		}
		fc.Set(start.Add(9*time.Second + 19*time.Second - 1))
		if len(p.calls) != 1 {
			t.Fatal("second probe early")
		}
		fc.Advance(1) // second probe (period 20s) fails too
		if len(p.calls) != 2 {
			t.Fatalf("%d probes", len(p.calls))
		}
		if got := fc.Deadlines(); len(got) != 1 || got[0] != 39*time.Second {
			t.Fatalf("third probe due in %v, want 39s (period 40s)", got)
		}
		fc.Advance(39 * time.Second) // third probe succeeds
		wantState(t, b, HalfOpen)
		if got := len(rec.got); got != 2 || rec.got[1] != "open->half-open" {
			t.Fatalf("listeners saw %v: a failed probe is not a state change", rec.got)
		}
	})
	t.Run("an answer after the timeout is a failure", func(t *testing.T) {
		p := &prober{take: 2 * time.Second}
		b, fc := newProbed(t, Config{OpenTimeout: 10 * time.Second, ProbeTimeout: 2 * time.Second}, p)
		mustCall(t, b, errDown)
		fc.Advance(9900 * time.Millisecond)
		if len(p.calls) != 1 || !errors.Is(p.ctxErrs[0], ErrProbeTimeout) {
			t.Fatalf("probe calls %d, context cause %v", len(p.calls), p.ctxErrs)
		}
		wantState(t, b, Open)
	})
	t.Run("never earlier than halfway", func(t *testing.T) {
		p := &prober{}
		b, fc := newProbed(t, Config{OpenTimeout: 100 * time.Millisecond, ProbeOffset: 80 * time.Millisecond}, p)
		mustCall(t, b, errDown)
		if got := fc.Deadlines(); len(got) != 1 || got[0] != 50*time.Millisecond {
			t.Fatalf("probe due in %v, want 50ms", got)
		}
	})
	t.Run("close stops probing", func(t *testing.T) {
		p := &prober{}
		b, fc := newProbed(t, Config{OpenTimeout: 10 * time.Second}, p)
		mustCall(t, b, errDown)
		b.Close()
		b.Close()
		if fc.Pending() != 0 {
			t.Fatal("probe timer still pending after Close")
		}
		fc.Advance(10 * time.Second)
		if len(p.calls) != 0 {
			t.Fatal("probe ran after Close")
		}
		wantState(t, b, HalfOpen) // the period ends on time again
		mustCall(t, b, errDown)
		if fc.Pending() != 0 {
			t.Fatal("a trip after Close started a probe timer")
		}
	})
}

// TestCloseWaitsForProbe runs a probe on the real clock that only returns
// when its context ends, and checks that Close cancels it and waits.
func TestCloseWaitsForProbe(t *testing.T) {
	started := make(chan struct{})
	var returned atomic.Bool
	b := New(Config{
		ConsecutiveFailures: 1,
		OpenTimeout:         2 * time.Millisecond,
		ProbeOffset:         time.Millisecond,
		ProbeTimeout:        time.Hour,
		Probe: func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			returned.Store(true)
			return ctx.Err()
		},
	})
	mustCall(t, b, errDown)
	<-started
	b.Close()
	if !returned.Load() {
		t.Fatal("Close returned while the probe was running")
	}
	if b.State() == Closed {
		t.Fatal("a cancelled probe must not close the breaker")
	}
}
