package hedge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// readyPanics is a breaker whose Ready panics with "ready" once armed.
type readyPanics struct {
	errBreaker
	armed atomic.Bool
}

func (b *readyPanics) Ready() error {
	if b.armed.Load() {
		panic("ready")
	}
	return nil
}

// callEndPanics is an Observer whose CallEnd panics with "callend", after
// recording it.
type callEndPanics struct{ events }

func (o *callEndPanics) CallEnd(ctx context.Context, s retry.CallEnd) {
	o.events.CallEnd(ctx, s)
	panic("callend")
}

// A callback that panics on the hedge timer's goroutine (here the
// breaker's Ready, as the timer asks it before a hedge) ends the call as a
// panic does, as Do's doc says: the Observer hears CallEnd with
// ReasonPanic, not ReasonPermanent. An Observer whose CallEnd panics then
// neither replaces the original panic nor keeps the earlier failed
// round's value from being released. Before, the call ended with
// retry.Call.Abandon: ReasonPermanent, and with a CallEnd that panicked,
// "v1" was never released and "callend" went on instead of "ready".
func TestHedgeTimerPanicEndsCallWithReasonPanic(t *testing.T) {
	transient := errors.New("transient")
	for _, tc := range []struct {
		name    string
		callEnd bool // the Observer's CallEnd panics
	}{
		{"observer", false},
		{"observer whose CallEnd panics", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake()
			br := &readyPanics{}
			var ev *events
			var obs retry.Observer
			if tc.callEnd {
				o := &callEndPanics{}
				ev, obs = &o.events, o
			} else {
				ev = new(events)
				obs = ev
			}
			p := &retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Clock: clk, Breaker: br, Observer: obs}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			s.answer(1, "v1", transient) // the first round fails at once
			pan := make(chan any, 1)
			go func() {
				defer func() { pan <- recover() }()
				hedge.Do(context.Background(), h, s.op, s.release)
			}()
			s.wait(t, 1)
			s.wait(t, 2)
			br.armed.Store(true)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond) // the timer asks Ready: it panics
			var r any
			select {
			case r = <-pan:
			case <-time.After(10 * time.Second):
				t.Fatal("Do hangs")
			}
			if r != "ready" {
				t.Fatalf("Do panicked with %v, want the breaker's %q", r, "ready")
			}
			released := s.releasedValues()
			slices.Sort(released)
			if want := []string{"v1", "v2-cancelled"}; !slices.Equal(released, want) {
				t.Fatalf("released %q, want %q", released, want)
			}
			if s.ctx(2).Err() == nil {
				t.Fatal("attempt 2's context not ended")
			}
			br.mu.Lock()
			if br.allows != len(br.dones) {
				t.Errorf("breaker: %d allowed, %d done: a permit is left out", br.allows, len(br.dones))
			}
			br.mu.Unlock()
			log := ev.String()
			if n := strings.Count(log, "callend:"); n != 1 || !strings.Contains(log, "callend:panic") {
				t.Fatalf("the Observer heard %s; want the call to end once, with ReasonPanic", log)
			}
		})
	}
}

// A release that panics ends the call (retry.Call.Abandon); an Observer
// whose CallEnd panics there must not replace the release's panic, which
// goes on, with every other value released. Before, "callend" went on.
func TestReleasePanicSurvivesCallEndPanic(t *testing.T) {
	transient := errors.New("transient")
	o := &callEndPanics{}
	p := &retry.Policy{MaxAttempts: 3, Backoff: zeroBackoff{}, Observer: o}
	h := &hedge.Hedger{Policy: p, Delay: time.Hour}
	vo := &valuesOp{errs: []error{transient, transient}}
	var released []string
	release := func(v string) {
		released = append(released, v)
		if v == "v1" {
			panic("release")
		}
	}
	r, _, _ := doPanics(h, vo.op, release)
	if r != "release" {
		t.Fatalf("Do panicked with %v, want the release's %q", r, "release")
	}
	slices.Sort(released)
	if want := []string{"v1", "v2"}; !slices.Equal(released, want) {
		t.Fatalf("released %q, want %q", released, want)
	}
	if log := o.String(); strings.Count(log, "callend:") != 1 {
		t.Fatalf("the Observer heard %s; want the call to end once", log)
	}
}
