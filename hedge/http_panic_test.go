package hedge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

type panickyAllow struct{}

func (panickyAllow) Allow() (func(error), error) { panic("allow") }
func (panickyAllow) Ready() error                { return nil }

// roundTripPanics runs tr.RoundTrip(req) and returns what it panicked
// with.
func roundTripPanics(tr *hedge.Transport, req *http.Request) (r any) {
	defer func() { r = recover() }()
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return nil
}

// A request sent once (a POST) whose body was never sent must be closed
// even when the call panics before sending it (the breaker's Allow): the
// RoundTripper contract asks it on every path.
func TestTransportClosesUnsentBodyOnPanic(t *testing.T) {
	tr := &hedge.Transport{
		Next:   rtFunc(func(*http.Request) (*http.Response, error) { t.Fatal("sent"); return nil, nil }),
		Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clocktest.NewFake(), Breaker: panickyAllow{}}},
	}
	body := &closeBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/", body)
	if r := roundTripPanics(tr, req); r != "allow" {
		t.Fatalf("RoundTrip panicked with %v, want the breaker's", r)
	}
	if body.closed != 1 {
		t.Fatalf("request body closed %d times, want 1", body.closed)
	}
}

// With Policy.AttemptTimeout, each copy arms a header timer on the
// Policy's Clock. A next RoundTripper that panicked left that timer armed
// (and the copy's context registered with its parent); both end with the
// attempt now.
func TestTransportRoundTripPanicStopsHeaderTimer(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		clk := clocktest.NewFake()
		tr := &hedge.Transport{
			Next:   rtFunc(func(*http.Request) (*http.Response, error) { panic("roundtrip") }),
			Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clk, AttemptTimeout: time.Second}, Delay: time.Hour, MaxHedges: hedge.NoHedges},
		}
		req, _ := http.NewRequestWithContext(context.Background(), method, "http://example.invalid/", nil)
		if r := roundTripPanics(tr, req); r != "roundtrip" {
			t.Fatalf("%s: RoundTrip panicked with %v, want the next RoundTripper's", method, r)
		}
		if n := clk.Pending(); n != 0 {
			t.Fatalf("%s: %d timers left armed", method, n)
		}
	}
}

type panickySource struct{}

func (panickySource) Policy() *retry.Policy { panic("source") }

// The Hedger's PolicySource is asked first of all: one that panics must
// not leave the request's body open, hedgeable or not.
func TestTransportPolicySourcePanicClosesBody(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		tr := &hedge.Transport{
			Next:   rtFunc(func(*http.Request) (*http.Response, error) { t.Fatal("sent"); return nil, nil }),
			Hedger: &hedge.Hedger{Policy: panickySource{}},
		}
		body := &closeBody{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(method, "http://example.invalid/", body)
		if r := roundTripPanics(tr, req); r != "source" {
			t.Fatalf("%s: RoundTrip panicked with %v, want the PolicySource's", method, r)
		}
		if body.closed != 1 {
			t.Fatalf("%s: request body closed %d times, want 1", method, body.closed)
		}
	}
}

// panicReadBody panics on Read and counts Close.
type panicReadBody struct{ closed int }

func (b *panicReadBody) Read([]byte) (int, error) { panic("read") }
func (b *panicReadBody) Close() error             { b.closed++; return nil }

// A response body whose Read panics — a failed response kept in memory,
// a loser's drained — is still closed: its connection is not left open.
func TestTransportClosesBodyWhoseReadPanics(t *testing.T) {
	body := &panicReadBody{}
	tr := &hedge.Transport{
		Next: rtFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: body}, nil
		}),
		Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clocktest.NewFake(), MaxAttempts: 1}},
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
	if r := roundTripPanics(tr, req); r != "read" {
		t.Fatalf("RoundTrip panicked with %v, want the body's read", r)
	}
	if body.closed != 1 {
		t.Fatalf("response body closed %d times, want 1", body.closed)
	}
}
