package httpretry_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Issue #25, blocker 3: "should this be retried" and "does this speak
// against the downstream's health" are separate. A breaker (its default
// IsFailure, retry.IsDownstreamFault) behind httpretry opens for a server
// that crashes (500, not retried) and for one overloaded (429, 503), and
// stays closed for client errors — 404, 409 — and for 408, which is
// retried but says nothing against the server (on 932de2c a retried 408
// counted as a failure and opened the breaker).
func TestBreakerHealthByStatus(t *testing.T) {
	for _, c := range []struct {
		code int
		open bool
	}{
		{500, true}, {502, true}, {503, true}, {429, true},
		{404, false}, {409, false}, {400, false}, {408, false},
	} {
		t.Run(fmt.Sprint(c.code), func(t *testing.T) {
			run(t, func(t *testing.T, m mode) {
				srv := newModeServer(t, m, statuses(c.code))
				br := breaker.New(breaker.Config{ConsecutiveFailures: 5, Clock: clocktest.NewFake()})
				p := noWait(1) // one attempt per call: the breaker hears every answer
				p.Breaker = br
				rt := httpretry.New(srv.base(t), p)
				for i := range 6 {
					resp, err := rt.RoundTrip(get(t, srv.URL))
					if err != nil {
						if !c.open || !errors.Is(err, breaker.ErrOpen) || i < 5 {
							t.Fatalf("call %d: %v", i+1, err)
						}
						continue
					}
					readAll(t, resp)
				}
				if got := br.State() == breaker.Open; got != c.open {
					t.Errorf("after 6 calls answered %d the breaker is %v, want open=%v (counts %+v)", c.code, br.State(), c.open, br.Counts())
				}
				if c.open && srv.hits.Load() != 5 {
					t.Errorf("%d requests reached the server, want 5 (the 6th refused by the open breaker)", srv.hits.Load())
				}
			}, http1Mode, http2Mode)
		})
	}
}

// Every error type the transport reports implements retry.FaultReporter
// with the protocol's defaults.
func TestFaultReporters(t *testing.T) {
	for code, want := range map[int]bool{500: true, 501: true, 503: true, 599: true, 429: true, 408: false, 404: false, 400: false, 499: false} {
		se := &httpretry.StatusError{StatusCode: code}
		if se.DownstreamFault() != want || retry.IsDownstreamFault(retry.Permanent(se)) != want ||
			retry.IsDownstreamFault(fmt.Errorf("wrapped: %w", se)) != want {
			t.Errorf("status %d: DownstreamFault = %v, want %v", code, se.DownstreamFault(), want)
		}
	}
	var _ retry.FaultReporter = (*httpretry.StatusError)(nil)
}
