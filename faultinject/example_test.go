package faultinject_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// The server side: a middleware in front of a handler. Here every request
// is aborted with 429 and a Retry-After.
func ExampleInjector_Handler() {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{
		Abort: faultinject.AbortRule{Percent: 100, Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Second},
	}})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	srv := httptest.NewServer(in.Handler(app))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(faultinject.HeaderFault))
	fmt.Println(in.Snapshot().Aborted)
	// Output:
	// 429 2 abort
	// 1
}

// The client side: a RoundTripper that fails requests before they leave.
func ExampleInjector_Transport() {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{ResetPercent: 100}})
	client := &http.Client{Transport: in.Transport(nil)}

	_, err := client.Get("http://127.0.0.1:9/never-sent")
	fmt.Println(errors.Is(err, syscall.ECONNRESET), errors.Is(err, faultinject.ErrInjected))
	// Output:
	// true true
}

// An outage schedule: 503 from 10s to 20s after the epoch, every minute.
// The fake clock stands in for time passing.
func ExampleRules_outages() {
	clk := clocktest.NewFake()
	in := faultinject.New(faultinject.Config{Clock: clk, Rules: faultinject.Rules{
		Outages:     []faultinject.Window{{Start: 10 * time.Second, End: 20 * time.Second, Status: 503}},
		OutageCycle: time.Minute,
	}})
	rt := in.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}))
	for _, at := range []time.Duration{0, 15 * time.Second, 45 * time.Second, 75 * time.Second} {
		clk.Set(clocktest.Epoch.Add(at))
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1:9/", nil)
		resp, _ := rt.RoundTrip(req)
		resp.Body.Close()
		fmt.Println(at, resp.StatusCode)
	}
	// Output:
	// 0s 200
	// 15s 503
	// 45s 200
	// 1m15s 503
}

// A server with capacity: two requests at a time, four more may wait, the
// rest get 503 with Retry-After: 1. Snapshot gives the gauges to chart.
func ExampleLimit() {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 2, Queue: 4, RetryAfter: time.Second},
	}})
	defer in.Close()
	srv := httptest.NewServer(in.Handler(nil))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	c := in.Snapshot()
	fmt.Println(resp.StatusCode, c.Passed, c.InFlight, c.PeakInFlight)
	// Output:
	// 200 1 0 1
}

// Replacing the rules and restarting their outage schedule in one step: an
// outage from now for 30s. With Update followed by SetEpoch, a request in
// between would meet the new rules measured from the old epoch.
func ExampleInjector_UpdateWithEpoch() {
	clk := clocktest.NewFake()
	in := faultinject.New(faultinject.Config{Clock: clk})
	rt := in.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}))
	status := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1:9/", nil)
		resp, _ := rt.RoundTrip(req)
		resp.Body.Close()
		return resp.StatusCode
	}
	clk.Advance(time.Hour) // the epoch is an hour old
	err := in.UpdateWithEpoch(faultinject.Rules{
		Outages: []faultinject.Window{{End: 30 * time.Second, Status: 503}},
	}, clk.Now())
	fmt.Println(err, status())
	clk.Advance(30 * time.Second)
	fmt.Println(status())
	// Output:
	// <nil> 503
	// 200
}
