package throttle_test

import (
	"testing"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/throttle"
)

// mustPanic runs f and reports whether it panicked.
func mustPanic(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// TestSREPanickingOverloadCountsNoAccept (sweep: callback panics, docs):
// an Overload that panics in done lets the panic go on, and the request
// stays counted without an accept, as SREConfig.Overload says; the SRE
// goes on working.
func TestSREPanickingOverloadCountsNoAccept(t *testing.T) {
	clk := clocktest.NewFake()
	s := throttle.NewSRE(throttle.SREConfig{Clock: clk, Overload: func(error) bool { panic("overload: boom") }})
	done, err := s.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if !mustPanic(func() { done(errPlain) }) {
		t.Fatal("the Overload panic did not go on")
	}
	if st := s.Stats(); st.Requests != 1 || st.Accepts != 0 {
		t.Fatalf("stats %+v, want 1 request and no accept", st)
	}
	done, err = s.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(nil)
	if st := s.Stats(); st.Requests != 2 || st.Accepts != 1 {
		t.Fatalf("stats %+v after a success", st)
	}
}

// TestAdaptivePanickingThrottledLeavesTheRate: a Throttled that panics
// lets the panic go on and leaves the rate as it was.
func TestAdaptivePanickingThrottledLeavesTheRate(t *testing.T) {
	b := throttle.NewAdaptive(throttle.AdaptiveConfig{Throttled: func(error) bool { panic("throttled: boom") }})
	if !mustPanic(func() { b.Answer(errPlain) }) {
		t.Fatal("the Throttled panic did not go on")
	}
	if st := b.Stats(); st.Enabled || st.MeasuredRate != 0 || st.FillRate != 0 {
		t.Fatalf("stats %+v after a panicking Throttled", st)
	}
}
