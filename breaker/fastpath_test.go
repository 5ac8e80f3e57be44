package breaker

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// TestFastHooksAreAllow checks the hooks retry's fused first attempt calls
// (internal/fastpath): Admit answers as Allow does or asks the caller to
// call Allow, and Succeed with EndStreak counts as the shared done does.
func TestFastHooksAreAllow(t *testing.T) {
	var x retry.Breaker = (*Breaker)(nil)
	if fastpath.Breaker.Tab.Load() != fastpath.TypeWord(unsafe.Pointer(&x)) {
		t.Fatal("fastpath.Breaker.Tab is not the type word of a *Breaker as a retry.Breaker")
	}
	fail := errors.New("fail")
	f := clocktest.NewFake()
	a := New(Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, Clock: f})
	b := New(Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, Clock: f})
	pb := unsafe.Pointer(b)
	// fail, fail, succeed, then fail three times: closed, streaks, open.
	for i, err := range []error{fail, fail, nil, fail, nil, fail, fail, fail} {
		da, aerr := a.Allow()
		e, db, berr := fastpath.Breaker.Admit(pb)
		if e == nil || db == nil || aerr != nil || berr != nil {
			t.Fatalf("step %d: closed breaker: Admit = %v, %v, %v", i, e, db != nil, berr)
		}
		da(err)
		if err != nil {
			db(err)
		} else if fastpath.Breaker.Succeed(pb, e, i%stripe.N) {
			fastpath.Breaker.EndStreak(pb, e)
		}
		if ca, cb := a.Counts(), b.Counts(); ca != cb {
			t.Fatalf("step %d: counts %+v by the hooks, %+v by done", i, cb, ca)
		}
	}
	if s := b.State(); s != Open {
		t.Fatalf("breaker %v after three failures in a row", s)
	}
	// On the real clock an open breaker refuses without Allow.
	o := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
	po := unsafe.Pointer(o)
	_, done, _ := fastpath.Breaker.Admit(po)
	done(fail)
	if e, done, err := fastpath.Breaker.Admit(po); e != nil || done != nil || !errors.Is(err, ErrOpen) {
		t.Fatalf("open breaker: Admit = %v, %v, %v", e, done != nil, err)
	}
	if r := fastpath.Breaker.Refusal(po, ErrOpen); r != o.refusedOpen {
		t.Fatalf("Refusal = %v, want the prebuilt *retry.Error", r)
	}
	if r := fastpath.Breaker.Refusal(po, fail); r != nil {
		t.Fatalf("Refusal of another error = %#v, want an untyped nil", r)
	}
	// On another clock every refusal reads the clock: Allow decides.
	f.Advance(time.Second)
	if e, done, err := fastpath.Breaker.Admit(pb); e != nil || done != nil || err != nil {
		t.Fatalf("ended open period: Admit = %v, %v, %v, want the caller to ask Allow", e, done != nil, err)
	}
	if e, done, err := fastpath.Breaker.Admit(nil); e != nil || done != nil || err != nil {
		t.Fatalf("nil breaker: Admit = %v, %v, %v, want the caller to ask Allow", e, done != nil, err)
	}
	// A success of an earlier generation is not counted.
	c := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: f})
	pc := unsafe.Pointer(c)
	e, done, _ := fastpath.Breaker.Admit(pc)
	done(fail) // trips
	if fastpath.Breaker.Succeed(pc, e, 0) || c.Counts() != (Counts{}) {
		t.Fatalf("a success of an earlier generation counted: %+v", c.Counts())
	}
	// A breaker that times slow calls has no shared done: not fused.
	s := New(Config{Window: Window{Calls: 10, FailureRatio: 0.5, SlowCallDuration: time.Second}, Clock: f})
	if e, done, err := fastpath.Breaker.Admit(unsafe.Pointer(s)); e != nil || done != nil || err != nil {
		t.Fatalf("slow-call breaker: Admit = %v, %v, %v", e, done != nil, err)
	}
}

// TestFastAdmitFirstIsAdmit checks the hook retry's fused first attempt
// admits with (internal/fastpath): AdmitFirst answers as Admit does, but
// for an open breaker's refusal, which is the call's final error, the
// prebuilt *retry.Error that Refusal gives for Admit's ErrOpen.
func TestFastAdmitFirstIsAdmit(t *testing.T) {
	f := clocktest.NewFake()
	for _, c := range []struct {
		name string
		b    *Breaker
	}{
		{"closed, consecutive", New(Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, Clock: f})},
		{"closed, window", New(Config{Window: Window{Calls: 10, FailureRatio: 0.5}, Clock: f})},
		{"closed, slow calls timed", New(Config{Window: Window{Calls: 10, FailureRatio: 0.5, SlowCallDuration: time.Second}, Clock: f})},
		{"open, fake clock", tripped(New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: f}))},
		{"nil", nil},
	} {
		p := unsafe.Pointer(c.b)
		e1, d1, err1 := fastpath.Breaker.Admit(p)
		e2, d2, err2 := fastpath.Breaker.AdmitFirst(p)
		if e1 != e2 || (d1 == nil) != (d2 == nil) || err1 != err2 {
			t.Errorf("%s: AdmitFirst = %v, %v, %v; Admit = %v, %v, %v", c.name, e2, d2 != nil, err2, e1, d1 != nil, err1)
		}
	}
	// On the real clock an open breaker refuses without Allow: the
	// refusal is the one Do returns.
	o := tripped(New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour}))
	po := unsafe.Pointer(o)
	_, _, admitted := fastpath.Breaker.Admit(po)
	e, done, err := fastpath.Breaker.AdmitFirst(po)
	if e != nil || done != nil || err == nil || err != fastpath.Breaker.Refusal(po, admitted) || err != error(o.refusedOpen) {
		t.Fatalf("open breaker: AdmitFirst = %v, %v, %v, want the prebuilt refusal %v", e, done != nil, err, o.refusedOpen)
	}
	// Without a prebuilt refusal (not made by New) Allow is asked.
	o.refusedOpen = nil
	if e, done, err := fastpath.Breaker.AdmitFirst(po); e != nil || done != nil || err != nil {
		t.Fatalf("open breaker without a prebuilt refusal: AdmitFirst = %v, %v, %v, want the caller to ask Allow", e, done != nil, err)
	}
}

// tripped opens b with one failure (b trips at one) and returns it.
func tripped(b *Breaker) *Breaker {
	done, _ := b.Allow()
	done(errors.New("fail"))
	return b
}

// TestInlinedHooksAreTheLeaves checks the hooks retry's fused first
// attempt inlines, written out from the offsets breaker registers:
// Current, Fast and DoneOf answer as Admit does for the closed state of
// the consecutive condition, and IsCurrent with AddSuccess count as
// Succeed does, cell by cell, through runs of failures, a trip and a
// generation that ended; and the offsets name the Breaker's own words.
func TestInlinedHooksAreTheLeaves(t *testing.T) {
	var z Breaker
	var ze epoch
	base, ebase := uintptr(unsafe.Pointer(&z)), uintptr(unsafe.Pointer(&ze))
	for _, w := range []struct {
		name      string
		got, want uintptr
	}{
		{"cur", base + fastpath.Breaker.Cur, uintptr(unsafe.Pointer(&z.cur))},
		{"streak", base + fastpath.Breaker.Streak, uintptr(unsafe.Pointer(&z.streak))},
		{"epoch.fast", ebase + fastpath.Breaker.Fast, uintptr(unsafe.Pointer(&ze.fast))},
		{"epoch.done", ebase + fastpath.Breaker.Done, uintptr(unsafe.Pointer(&ze.done))},
	} {
		if w.got != w.want {
			t.Fatalf("%s is at %#x, fastpath has %#x", w.name, w.want-base, w.got-base)
		}
	}
	for i := range stripe.N {
		if got, want := base+fastpath.Breaker.Successes.Off+uintptr(i)*fastpath.Breaker.Successes.Stride, uintptr(unsafe.Pointer(&z.stripes.At(i).successes)); got != want {
			t.Fatalf("cell %d: the success counter is at %#x, fastpath has %#x", i, want-base, got-base)
		}
	}

	fail := errors.New("fail")
	f := clocktest.NewFake()
	cfg := Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, Clock: f}
	a, b := New(cfg), New(cfg)
	pa, pb := unsafe.Pointer(a), unsafe.Pointer(b)
	// fail, fail, succeed, then fail three times: closed, streaks, open.
	for i, err := range []error{fail, fail, nil, nil, fail, nil, fail, fail, fail} {
		ea, da, aerr := fastpath.Breaker.Admit(pa)
		eb := fastpath.Current(pb)
		if aerr != nil || ea == nil || !fastpath.Fast(eb) || fastpath.DoneOf(eb) == nil {
			t.Fatalf("step %d: closed breaker: Admit = %v, %v, %v; Fast %v", i, ea, da != nil, aerr, fastpath.Fast(eb))
		}
		if err != nil {
			da(err)
			fastpath.DoneOf(eb)(err)
		} else {
			h := (5 * i) % stripe.N
			sa := fastpath.Breaker.Succeed(pa, ea, h)
			sb := fastpath.IsCurrent(pb, eb) && fastpath.AddSuccess(pb, h)
			if sa != sb {
				t.Fatalf("step %d: IsCurrent and AddSuccess ask to end a streak: %v, Succeed: %v", i, sb, sa)
			}
			if sa {
				fastpath.Breaker.EndStreak(pa, ea)
				fastpath.Breaker.EndStreak(pb, eb)
			}
		}
		if ca, cb := a.Counts(), b.Counts(); ca != cb {
			t.Fatalf("step %d: counts %+v by the inlined hooks, %+v by the leaves", i, cb, ca)
		}
		for c := range stripe.N {
			if sa, sb := a.stripes.At(c).successes.Load(), b.stripes.At(c).successes.Load(); sa != sb {
				t.Fatalf("step %d, cell %d: %d successes by the inlined hooks, %d by the leaves", i, c, sb, sa)
			}
		}
	}
	if s := b.State(); s != Open {
		t.Fatalf("breaker %v after three failures in a row", s)
	}
	// An open state is not fast: AdmitFirst decides.
	if e := fastpath.Current(pb); fastpath.Fast(e) {
		t.Fatal("an open breaker's state is fast")
	}
	// A success of an earlier generation is not counted.
	c := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: f})
	pc := unsafe.Pointer(c)
	e := fastpath.Current(pc)
	fastpath.DoneOf(e)(fail) // trips
	if fastpath.IsCurrent(pc, e) {
		t.Fatalf("the state before the trip is current: counts %+v", c.Counts())
	}
	// Only the consecutive condition's closed state is fast.
	for _, cfg := range []Config{
		{Window: Window{Calls: 10, FailureRatio: 0.5}, Clock: f},
		{Window: Window{Calls: 10, FailureRatio: 0.5, SlowCallDuration: time.Second}, Clock: f},
	} {
		if fastpath.Fast(fastpath.Current(unsafe.Pointer(New(cfg)))) {
			t.Errorf("%+v: a state whose successes Succeed cannot count is fast", cfg.Window)
		}
	}
}
