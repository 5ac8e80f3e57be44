package faultinject_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/retry"
)

func okHandler(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
}

func TestHandlerPassesThroughWithZeroRules(t *testing.T) {
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{})
	srv := serve(t, in.Handler(okHandler(&calls)))
	c := newClient(t)
	for range 3 {
		r := get(t, c, srv.URL)
		if r.err != nil || r.status != 200 || r.body != "ok" || r.header.Get(faultinject.HeaderFault) != "" {
			t.Fatalf("got %+v, want a plain 200 ok", r)
		}
	}
	s := in.Snapshot()
	if calls.Load() != 3 || s.Requests != 3 || s.Passed != 3 || s.Settled() != 3 || s.PeakInFlight != 1 {
		t.Fatalf("calls %d, counters %+v", calls.Load(), s)
	}
}

func TestHandlerAbortAnswersStatusAndRetryAfter(t *testing.T) {
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{
		Abort: faultinject.AbortRule{Percent: 100, Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond},
	}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	r := get(t, newClient(t), srv.URL)
	if r.err != nil || r.status != 429 {
		t.Fatalf("got %+v, want 429", r)
	}
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2 (1.5s rounded up)", got)
	}
	if got := r.header.Get(faultinject.HeaderFault); got != "abort" {
		t.Errorf("%s = %q, want abort", faultinject.HeaderFault, got)
	}
	if !strings.Contains(r.body, "injected abort") {
		t.Errorf("body %q", r.body)
	}
	if s := in.Snapshot(); calls.Load() != 0 || s.Aborted != 1 || s.Passed != 0 {
		t.Fatalf("calls %d, counters %+v", calls.Load(), s)
	}
}

// statuses sends n sequential requests through a fresh Injector with the
// given seed and rules and returns the statuses.
func statuses(t *testing.T, seed uint64, rules faultinject.Rules, n int) ([]int, faultinject.Counters) {
	t.Helper()
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Seed: seed, Rules: rules})
	srv := serve(t, in.Handler(okHandler(&calls)))
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout) // bounds the loop in time too
	defer cancel()
	out := make([]int, n)
	for i := range out {
		r := do(ctx, c, http.MethodGet, srv.URL)
		if r.err != nil {
			t.Fatal(r.err)
		}
		out[i] = r.status
	}
	return out, in.Snapshot()
}

func TestHandlerAbortPercentIsSeededAndReproducible(t *testing.T) {
	rules := faultinject.Rules{Abort: faultinject.AbortRule{Percent: 30}}
	const n = 200
	a, ca := statuses(t, 7, rules, n)
	b, _ := statuses(t, 7, rules, n)
	other, _ := statuses(t, 8, rules, n)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different decisions")
	}
	if slices.Equal(a, other) {
		t.Fatal("seeds 7 and 8 gave the same 200 decisions")
	}
	aborted := 0
	for _, s := range a {
		if s == 503 {
			aborted++
		} else if s != 200 {
			t.Fatalf("unexpected status %d", s)
		}
	}
	// 30% of 200 is 60; a binomial's 4-sigma band is about ±26.
	if aborted < 34 || aborted > 86 || ca.Aborted != uint64(aborted) || ca.Passed != uint64(n-aborted) {
		t.Fatalf("aborted %d of %d, counters %+v", aborted, n, ca)
	}
}

func TestHandlerLatencyWaitsOnTheClock(t *testing.T) {
	clk := clocktest.NewFake()
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Clock: clk, Seed: 3, Rules: faultinject.Rules{
		Latency: 100 * time.Millisecond, Jitter: 50 * time.Millisecond,
	}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	res := goDo(context.Background(), newClient(t), srv.URL)

	clk.BlockUntil(1)
	d := clk.Deadlines()[0]
	if d < 100*time.Millisecond || d > 150*time.Millisecond {
		t.Fatalf("latency %v outside [100ms, 150ms]", d)
	}
	if calls.Load() != 0 {
		t.Fatal("the handler ran before the latency had passed")
	}
	clk.Advance(d - 1)
	if calls.Load() != 0 || clk.Pending() != 1 {
		t.Fatal("the latency ended early")
	}
	clk.Advance(1)
	if r := recv(t, res); r.err != nil || r.status != 200 {
		t.Fatalf("got %+v", r)
	}
	if s := in.Snapshot(); s.Delayed != 1 || s.DelayTotal != d || s.Passed != 1 || calls.Load() != 1 {
		t.Fatalf("counters %+v", s)
	}
}

func TestHandlerLatencyCanceledByClient(t *testing.T) {
	clk := clocktest.NewFake()
	ev := newEvents()
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Clock: clk, OnEvent: ev.record, Rules: faultinject.Rules{Latency: time.Second}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	ctx, cancel := context.WithCancel(context.Background())
	res := goDo(ctx, newClient(t), srv.URL)
	clk.BlockUntil(1)
	clk.Advance(300 * time.Millisecond)
	cancel()
	if r := recv(t, res); !clientLeft(r) {
		t.Fatalf("client got %+v, want context.Canceled", r)
	}
	e := ev.waitFor(t, faultinject.Cancel)
	if e.Delay != 300*time.Millisecond {
		t.Errorf("event delay %v, want 300ms", e.Delay)
	}
	srv.Close()
	if s := in.Snapshot(); s.Canceled != 1 || s.Passed != 0 || calls.Load() != 0 || s.InFlight != 0 || s.DelayTotal != 300*time.Millisecond {
		t.Fatalf("calls %d, counters %+v", calls.Load(), s)
	}
}

func TestHandlerResetIsSeenAsECONNRESET(t *testing.T) {
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{ResetPercent: 100}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	c := newClient(t)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := do(context.Background(), c, method, srv.URL)
		if !errors.Is(r.err, syscall.ECONNRESET) {
			t.Fatalf("%s: got %+v, want an error wrapping ECONNRESET", method, r)
		}
		if !retry.IsTransientNetError(r.err) {
			t.Errorf("%s: retry.IsTransientNetError(%v) = false", method, r.err)
		}
	}
	if s := in.Snapshot(); s.Resets != 2 || calls.Load() != 0 {
		t.Fatalf("calls %d, counters %+v", calls.Load(), s)
	}
}

func TestHandlerHangsUntilClientGivesUp(t *testing.T) {
	ev := newEvents()
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{HangPercent: 100}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	ctx, cancel := context.WithCancel(context.Background())
	res := goDo(ctx, newClient(t), srv.URL)
	ev.waitFor(t, faultinject.Hang)
	select {
	case r := <-res:
		t.Fatalf("a hanging request returned %+v", r)
	default:
	}
	cancel()
	if r := recv(t, res); !clientLeft(r) {
		t.Fatalf("got %+v, want context.Canceled", r)
	}
	srv.Close() // waits for the handler to return
	if s := in.Snapshot(); s.Hangs != 1 || s.Hanging != 0 || s.InFlight != 0 || calls.Load() != 0 {
		t.Fatalf("calls %d, counters %+v", calls.Load(), s)
	}
}

func TestHandlerOutageSchedule(t *testing.T) {
	clk := clocktest.NewFake()
	ev := newEvents()
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Clock: clk, OnEvent: ev.record, Rules: faultinject.Rules{
		Outages: []faultinject.Window{
			{Start: 10 * time.Second, End: 20 * time.Second, Status: 502, RetryAfter: 2 * time.Second},
			{Start: 30 * time.Second, End: 40 * time.Second, Action: faultinject.Reset},
			{Start: 50 * time.Second, End: 60 * time.Second, Action: faultinject.Hang},
		},
	}})
	srv := serve(t, in.Handler(okHandler(&calls)))
	c := newClient(t)
	at := func(d time.Duration) { clk.Set(clocktest.Epoch.Add(d)) }

	if r := get(t, c, srv.URL); r.status != 200 {
		t.Fatalf("t=0: %+v", r)
	}
	at(10 * time.Second)
	r := get(t, c, srv.URL)
	if r.status != 502 || r.header.Get("Retry-After") != "2" || r.header.Get(faultinject.HeaderFault) != "outage" {
		t.Fatalf("t=10s: %+v, want 502 outage with Retry-After 2", r)
	}
	if w, ok := in.Outage(); !ok || w.Start != 10*time.Second {
		t.Fatalf("Outage() = %+v, %v", w, ok)
	}
	at(20 * time.Second)
	if r := get(t, c, srv.URL); r.status != 200 {
		t.Fatalf("t=20s (window end is exclusive): %+v", r)
	}
	if _, ok := in.Outage(); ok {
		t.Fatal("Outage() reports a window at t=20s")
	}
	at(35 * time.Second)
	if r := get(t, c, srv.URL); !errors.Is(r.err, syscall.ECONNRESET) {
		t.Fatalf("t=35s: %+v, want a reset", r)
	}
	at(59 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	res := goDo(ctx, c, srv.URL)
	if e := ev.waitFor(t, faultinject.Hang); !e.Outage {
		t.Fatalf("hang event %+v not marked as outage", e)
	}
	cancel()
	if r := recv(t, res); !clientLeft(r) {
		t.Fatalf("t=59s: %+v, want the client's cancellation", r)
	}
	at(60 * time.Second)
	if r := get(t, c, srv.URL); r.status != 200 {
		t.Fatalf("t=60s: %+v", r)
	}
	srv.Close()
	s := in.Snapshot()
	if s.Outage != 3 || s.Aborted != 1 || s.Resets != 1 || s.Hangs != 1 || s.Passed != 3 || s.Settled() != s.Requests {
		t.Fatalf("counters %+v", s)
	}
}

func TestHandlerOutageCycleRepeats(t *testing.T) {
	clk := clocktest.NewFake()
	in := faultinject.New(faultinject.Config{Clock: clk, Rules: faultinject.Rules{
		OutageCycle: 10 * time.Second,
		Outages:     []faultinject.Window{{Start: 0, End: 2 * time.Second, Status: 503}},
	}})
	srv := serve(t, in.Handler(nil))
	c := newClient(t)
	for _, step := range []struct {
		at   time.Duration
		want int
	}{{0, 503}, {time.Second, 503}, {2 * time.Second, 200}, {9 * time.Second, 200}, {10 * time.Second, 503}, {31 * time.Second, 503}, {32 * time.Second, 200}} {
		clk.Set(clocktest.Epoch.Add(step.at))
		if r := get(t, c, srv.URL); r.status != step.want {
			t.Errorf("t=%v: status %d, want %d", step.at, r.status, step.want)
		}
	}
	// SetEpoch restarts the schedule.
	in.SetEpoch(clk.Now().Add(-5 * time.Second))
	if r := get(t, c, srv.URL); r.status != 200 {
		t.Errorf("after SetEpoch(now-5s): status %d, want 200", r.status)
	}
	in.SetEpoch(clk.Now())
	if r := get(t, c, srv.URL); r.status != 503 || !in.Epoch().Equal(clk.Now()) {
		t.Errorf("after SetEpoch(now): status %d, want 503", r.status)
	}
}

func TestHandlerLimitQueuesThenRejects(t *testing.T) {
	gs := newGated(t, faultinject.Config{Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 2, Queue: 1, RetryAfter: time.Second},
	}})
	first := gs.enter(t)
	second := gs.enter(t)
	third := gs.send(context.Background())
	gs.ev.waitFor(t, faultinject.Queue)

	r := get(t, gs.c, gs.srv.URL)
	if r.status != 503 || r.header.Get("Retry-After") != "1" || r.header.Get(faultinject.HeaderFault) != "reject" {
		t.Fatalf("fourth request: %+v, want a 503 rejection", r)
	}
	if s := gs.in.Snapshot(); s.InFlight != 2 || s.Waiting != 1 || s.Rejected != 1 || s.Queued != 1 {
		t.Fatalf("while full: %+v", s)
	}
	gs.g.release <- struct{}{} // one of the first two finishes; the third takes its slot
	recv(t, gs.g.entered)
	gs.g.release <- struct{}{}
	gs.g.release <- struct{}{}
	for _, ch := range []<-chan result{first, second, third} {
		if r := recv(t, ch); r.status != 200 {
			t.Fatalf("got %+v", r)
		}
	}
	gs.srv.Close()
	s := gs.in.Snapshot()
	if s.Passed != 3 || s.Rejected != 1 || s.InFlight != 0 || s.Waiting != 0 || s.PeakInFlight != 2 || s.PeakWaiting != 1 {
		t.Fatalf("counters %+v", s)
	}
}

func TestHandlerLimitQueueTimeout(t *testing.T) {
	clk := clocktest.NewFake()
	gs := newGated(t, faultinject.Config{Clock: clk, Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 1, Queue: 1, QueueTimeout: time.Second, Status: 429},
	}})
	first := gs.enter(t)
	second := gs.send(context.Background())
	clk.BlockUntil(1) // the queue timeout's timer
	clk.Advance(time.Second)
	if r := recv(t, second); r.status != 429 {
		t.Fatalf("queued request: %+v, want 429 after the queue timeout", r)
	}
	if e := gs.ev.waitFor(t, faultinject.Reject); e.Waited != time.Second {
		t.Errorf("reject event waited %v, want 1s", e.Waited)
	}
	gs.g.release <- struct{}{}
	if r := recv(t, first); r.status != 200 {
		t.Fatalf("first: %+v", r)
	}
}

func TestHandlerLimitQueuedClientGivesUp(t *testing.T) {
	gs := newGated(t, faultinject.Config{Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 1, Queue: 4},
	}})
	first := gs.enter(t)
	ctx, cancel := context.WithCancel(context.Background())
	second := gs.send(ctx)
	gs.ev.waitFor(t, faultinject.Queue)
	cancel()
	recv(t, second)
	gs.ev.waitFor(t, faultinject.Cancel)
	if s := gs.in.Snapshot(); s.Waiting != 0 || s.Canceled != 1 || s.InFlight != 1 {
		t.Fatalf("after the queued caller left: %+v", s)
	}
	gs.g.release <- struct{}{}
	recv(t, first)
}

func TestUpdateRaisingTheLimitAdmitsWaiters(t *testing.T) {
	gs := newGated(t, faultinject.Config{Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 1, Queue: 2},
	}})
	res := []<-chan result{gs.enter(t), gs.send(context.Background()), gs.send(context.Background())}
	gs.ev.waitFor(t, faultinject.Queue)
	gs.ev.waitFor(t, faultinject.Queue)
	if err := gs.in.Update(faultinject.Rules{Limit: faultinject.Limit{Concurrency: 3}}); err != nil {
		t.Fatal(err)
	}
	recv(t, gs.g.entered)
	recv(t, gs.g.entered)
	if s := gs.in.Snapshot(); s.InFlight != 3 || s.Waiting != 0 {
		t.Fatalf("after raising the limit: %+v", s)
	}
	close(gs.g.release)
	for _, ch := range res {
		if r := recv(t, ch); r.status != 200 {
			t.Fatalf("got %+v", r)
		}
	}
}

func TestUpdateChangesRulesAtRunTime(t *testing.T) {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100}}})
	srv := serve(t, in.Handler(nil))
	c := newClient(t)
	if r := get(t, c, srv.URL); r.status != 503 {
		t.Fatalf("before Update: %+v", r)
	}
	bad := faultinject.Rules{ResetPercent: 120}
	if err := in.Update(bad); !errors.Is(err, faultinject.ErrInvalidRules) {
		t.Fatalf("Update(invalid) = %v, want ErrInvalidRules", err)
	}
	if in.Rules().Abort.Percent != 100 {
		t.Fatal("a refused Update changed the rules")
	}
	if err := in.Update(faultinject.Rules{}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, c, srv.URL); r.status != 200 {
		t.Fatalf("after Update: %+v", r)
	}
}

func TestCloseRejectsQueuedRequestsThenPassesAll(t *testing.T) {
	gs := newGated(t, faultinject.Config{Rules: faultinject.Rules{
		Limit: faultinject.Limit{Concurrency: 1, Queue: 1},
	}})
	first := gs.enter(t)
	queued := gs.send(context.Background())
	gs.ev.waitFor(t, faultinject.Queue)
	gs.in.Close()
	if r := recv(t, queued); r.status != 503 || r.header.Get(faultinject.HeaderFault) != "reject" {
		t.Fatalf("queued request after Close: %+v, want a rejection", r)
	}
	// After Close nothing is limited: a second request runs beside the first.
	after := gs.enter(t)
	close(gs.g.release)
	for _, ch := range []<-chan result{first, after} {
		if r := recv(t, ch); r.status != 200 {
			t.Fatalf("got %+v", r)
		}
	}
	gs.in.Close() // idempotent
}

func TestCloseEndsHangs(t *testing.T) {
	ev := newEvents()
	in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{HangPercent: 100}})
	srv := serve(t, in.Handler(nil))
	res := goDo(context.Background(), newClient(t), srv.URL)
	ev.waitFor(t, faultinject.Hang)
	in.Close()
	if r := recv(t, res); r.status != 503 || r.header.Get(faultinject.HeaderFault) != "closed" {
		t.Fatalf("hanging request after Close: %+v", r)
	}
}

func TestNilInjector(t *testing.T) {
	var in *faultinject.Injector
	h := http.NotFoundHandler()
	if got := in.Handler(h); got == nil {
		t.Fatal("nil Injector's Handler returned nil")
	}
	if in.Transport(nil) != http.DefaultTransport {
		t.Fatal("nil Injector's Transport(nil) is not http.DefaultTransport")
	}
	if s := in.Snapshot(); s != (faultinject.Counters{}) {
		t.Fatal("nil Injector has counters")
	}
	in.Close()
	in.SetEpoch(time.Now())
	if err := in.Update(faultinject.Rules{Latency: time.Second}); err != nil {
		t.Fatalf("nil Injector's Update: %v", err)
	}
	if err := in.Update(faultinject.Rules{Latency: -1}); !errors.Is(err, faultinject.ErrInvalidRules) {
		t.Fatalf("nil Injector's Update of invalid rules: %v", err)
	}
	if _, ok := in.Outage(); ok || !in.Rules().IsZero() || !in.Epoch().IsZero() {
		t.Fatal("nil Injector reports rules")
	}
}

func TestNewPanicsOnInvalidRules(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "faultinject: ") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	faultinject.New(faultinject.Config{Rules: faultinject.Rules{Latency: -1}})
}

func TestHandlerResetOverTLS(t *testing.T) {
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{ResetPercent: 100}})
	srv := httptest.NewUnstartedServer(in.Handler(nil))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	if r := get(t, c, srv.URL); !errors.Is(r.err, syscall.ECONNRESET) {
		t.Fatalf("HTTP/1.1 over TLS: %+v, want ECONNRESET", r)
	}
}

// Over HTTP/2 the connection cannot be hijacked: the stream is aborted.
func TestHandlerResetOverHTTP2AbortsTheStream(t *testing.T) {
	var calls atomic.Int64
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{ResetPercent: 100}})
	srv := httptest.NewUnstartedServer(in.Handler(okHandler(&calls)))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("HTTP/2 reset: got %s (proto %s), want an error", resp.Status, resp.Proto)
	}
	if s := in.Snapshot(); s.Resets != 1 || calls.Load() != 0 {
		t.Fatalf("counters %+v", s)
	}
}
