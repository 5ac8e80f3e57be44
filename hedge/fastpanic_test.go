package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// stepPanicker panics in one step of the call: the Observer's event
// named in, for attempt at (CallEnd: the call's end whatever at is), or
// the backoff ("backoff") after attempt at.
type stepPanicker struct {
	retry.NopObserver
	in string
	at int
}

func (o *stepPanicker) AttemptStart(ctx context.Context, s retry.AttemptStart) context.Context {
	if o.in == "start" && s.Attempt == o.at {
		panic("boom in start")
	}
	return ctx
}

func (o *stepPanicker) AttemptEnd(_ context.Context, s retry.AttemptEnd) {
	if o.in == "end" && s.Attempt == o.at {
		panic("boom in end")
	}
}

func (o *stepPanicker) CallEnd(context.Context, retry.CallEnd) {
	if o.in == "callend" {
		panic("boom in callend")
	}
}

func (o *stepPanicker) Delay(n int, _ time.Duration) time.Duration {
	if o.in == "backoff" && n == o.at {
		panic("boom in backoff")
	}
	return 0
}

// valuesOp answers attempt n with value "vn" and the error errs[n-1]
// (nil past the end), at once.
type valuesOp struct {
	mu       sync.Mutex
	n        int
	errs     []error
	released []string
	ctxs     []context.Context
}

func (o *valuesOp) op(ctx context.Context) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	o.ctxs = append(o.ctxs, ctx)
	var err error
	if o.n <= len(o.errs) {
		err = o.errs[o.n-1]
	}
	return fmt.Sprintf("v%d", o.n), err
}

func (o *valuesOp) release(v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, v)
}

// doPanics runs Do and returns what it panicked with (nil for none) and
// what it returned.
func doPanics(h *hedge.Hedger, op func(context.Context) (string, error), release func(string)) (r any, v string, err error) {
	defer func() { r = recover() }()
	v, err = hedge.Do(context.Background(), h, op, release)
	return nil, v, err
}

// A callback that panics after an attempt returned on the caller's
// goroutine, with no hedge running (End's Observer, the backoff in Next,
// CallEnd in Succeed, AttemptStart of the next Begin), must not leak
// the values Do holds: the value of an earlier failed attempt and the
// value of the attempt that just returned are released, and the panic
// goes on, every attempt's context ended.
func TestFastPathPanicReleasesHeldValues(t *testing.T) {
	transient := errors.New("transient")
	for _, tc := range []struct {
		name string
		in   string
		at   int
		errs []error
		want []string
	}{
		{"end of the second attempt", "end", 2, []error{transient, transient}, []string{"v1", "v2"}},
		{"end of the first attempt", "end", 1, []error{transient}, []string{"v1"}},
		{"backoff after the second attempt", "backoff", 2, []error{transient, transient}, []string{"v1", "v2"}},
		{"call end after the second attempt won", "callend", 0, []error{transient}, []string{"v1", "v2"}},
		{"call end after the first attempt won", "callend", 0, nil, []string{"v1"}},
		{"start of the second attempt", "start", 2, []error{transient}, []string{"v1"}},
	} {
		for _, hedges := range []int{hedge.NoHedges, 1} {
			t.Run(fmt.Sprintf("%s/hedges=%d", tc.name, hedges), func(t *testing.T) {
				obs := &stepPanicker{in: tc.in, at: tc.at}
				clk := clocktest.NewFake()
				p := &retry.Policy{MaxAttempts: 5, Backoff: obs, Clock: clk, Observer: obs}
				h := &hedge.Hedger{Policy: p, Delay: time.Hour, MaxHedges: hedges}
				o := &valuesOp{errs: tc.errs}
				r, v, err := doPanics(h, o.op, o.release)
				if r == nil || !strings.HasPrefix(fmt.Sprint(r), "boom in "+tc.in) {
					t.Fatalf("Do = %q, %v, panic %v; want the panic of %s", v, err, r, tc.in)
				}
				if !slices.Equal(o.released, tc.want) {
					t.Fatalf("released %q, want %q", o.released, tc.want)
				}
				for i, ctx := range o.ctxs {
					if ctx.Err() == nil {
						t.Fatalf("attempt %d's context not ended", i+1)
					}
				}
				if clk.Pending() != 0 {
					t.Fatalf("%d timers left", clk.Pending())
				}
			})
		}
	}
}

// panickyDone is a breaker whose done panics on a success (a listener's
// panic re-raised): with no Observer the first attempt runs inline, and
// its success is reported by retry.Inline.Succeed.
type panickyDone struct{}

func (panickyDone) Allow() (func(error), error) {
	return func(err error) {
		if err == nil {
			panic("boom in done")
		}
	}, nil
}
func (panickyDone) Ready() error { return nil }

// The inline first attempt's success, reported to a breaker whose done
// panics, must not leak the value Do then cannot return.
func TestInlineSucceedPanicReleasesValue(t *testing.T) {
	for _, hedges := range []int{hedge.NoHedges, 1} {
		p := &retry.Policy{MaxAttempts: 5, Breaker: panickyDone{}, Clock: clocktest.NewFake()}
		h := &hedge.Hedger{Policy: p, Delay: time.Hour, MaxHedges: hedges}
		o := &valuesOp{}
		if r, _, _ := doPanics(h, o.op, o.release); r != "boom in done" {
			t.Fatalf("hedges %d: panic %v, want boom in done", hedges, r)
		}
		if !slices.Equal(o.released, []string{"v1"}) {
			t.Fatalf("hedges %d: released %q, want [v1]", hedges, o.released)
		}
	}
}

// After a hedged round, a callback that panics in the call's next step
// (the backoff in Next after every copy failed, CallEnd after a hedge
// won) must not leak what the round left Do holding: every value is
// released, the winner's included, and the panic goes on.
func TestHedgedRoundPanicReleasesValues(t *testing.T) {
	for _, tc := range []struct {
		in     string
		second error // the hedge's answer; the first attempt fails, or loses
		want   []string
	}{
		{"backoff", errors.New("transient"), []string{"v1", "v2"}},
		{"callend", nil, []string{"v1-cancelled", "v2"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			clk := clocktest.NewFake()
			obs := &stepPanicker{in: tc.in, at: 2}
			p := &retry.Policy{MaxAttempts: 5, Backoff: obs, Clock: clk, Observer: obs}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			out, pan := runRelease(h, s, s.release)
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
			s.wait(t, 2)
			s.answer(2, "v2", tc.second)
			if tc.second != nil {
				s.answer(1, "v1", errors.New("transient"))
			}
			wantPanic(t, out, pan, "boom in "+tc.in)
			got := s.releasedValues()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("released %q, want %q", got, tc.want)
			}
		})
	}
}
