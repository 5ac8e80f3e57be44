package hedge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
)

// runRelease runs Do with release and returns its result, or what it
// panicked with.
func runRelease(h *hedge.Hedger, s *script, release func(string)) (chan result, chan any) {
	out := make(chan result, 1)
	pan := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				pan <- r
			}
		}()
		v, err := hedge.Do(context.Background(), h, s.op, release)
		out <- result{v, err}
	}()
	return out, pan
}

func wantPanic(t *testing.T, out chan result, pan chan any, want any) {
	t.Helper()
	select {
	case r := <-out:
		t.Fatalf("Do returned %q, %v; want a panic", r.v, r.err)
	case got := <-pan:
		if got != want {
			t.Fatalf("Do panicked with %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do hangs")
	}
}

// panicOn returns a release that records every value and panics on v.
func panicOn(s *script, v string) func(string) {
	return func(x string) {
		s.release(x)
		if x == v {
			panic("release boom")
		}
	}
}

// A release that panics on a losing hedge's value, in the hedge's
// goroutine, must not make Do hang: the winner is released (Do does not
// return it), the call ends for the Observer, and the panic goes on.
func TestHedgeReleasePanicDoesNotHang(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	s := newScript()
	out, pan := runRelease(h, s, panicOn(s, "v2-cancelled"))
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", nil)
	wantPanic(t, out, pan, "release boom")
	if got := s.releasedValues(); !slices.Contains(got, "v1") || !slices.Contains(got, "v2-cancelled") {
		t.Fatalf("released %q, want the winner and the loser", got)
	}
	if log := ev.String(); !strings.Contains(log, "callend:") {
		t.Fatalf("the Observer did not hear the call end: %s", log)
	}
}

// A release that panics on the caller's goroutine (the first attempt lost
// to a hedge) must not leak the winner: its value is released, the
// Observer hears the call end, and the panic goes on.
func TestCallerReleasePanicReleasesWinner(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	s := newScript()
	out, pan := runRelease(h, s, panicOn(s, "v1-cancelled"))
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(2, "v2", nil)
	wantPanic(t, out, pan, "release boom")
	if got := s.releasedValues(); !slices.Contains(got, "v2") {
		t.Fatalf("released %q: the winner leaked", got)
	}
	if log := ev.String(); !strings.Contains(log, "callend:") {
		t.Fatalf("the Observer did not hear the call end: %s", log)
	}
}

// A release that panics on a superseded failure, between retries of an
// unhedged round, ends the call for the Observer and releases the value
// it holds.
func TestReleasePanicBetweenRetries(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), MaxHedges: hedge.NoHedges}
	s := newScript()
	out, pan := runRelease(h, s, panicOn(s, "v1"))
	s.wait(t, 1)
	s.answer(1, "v1", errors.New("boom"))
	clk.BlockUntil(1)
	clk.Advance(time.Second)
	s.wait(t, 2)
	s.answer(2, "v2", errors.New("boom"))
	wantPanic(t, out, pan, "release boom")
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("released %q", got)
	}
	if log := ev.String(); !strings.Contains(log, "callend:") {
		t.Fatalf("the Observer did not hear the call end: %s", log)
	}
}

// MaxHedges: NoHedges still hands every failed attempt's value that Do
// does not return to release.
func TestNoHedgesKeepsRelease(t *testing.T) {
	clk := clocktest.NewFake()
	h := &hedge.Hedger{Policy: policy(clk, nil), MaxHedges: hedge.NoHedges}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	s.answer(1, "v1", errors.New("boom"))
	clk.BlockUntil(1)
	clk.Advance(time.Second)
	s.wait(t, 2)
	s.answer(2, "v2", errors.New("boom"))
	clk.BlockUntil(1)
	clk.Advance(time.Second)
	s.wait(t, 3)
	s.answer(3, "v3", nil)
	r := get(t, out)
	if r.v != "v3" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("released %q, want [v1 v2]", got)
	}
}
