package faultinject_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// signalReturn wraps h and reports on the returned channel each time h
// returns.
func signalReturn(h http.Handler) (http.Handler, <-chan struct{}) {
	ch := make(chan struct{}, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		ch <- struct{}{}
	}), ch
}

// A hung request whose body was never read ends when its client leaves,
// and frees its slot: over HTTP/1.x net/http notices the client leaving
// only once the body has been read, so the hang must read it (#26 item 6).
func TestHandlerHungPostEndsWhenClientLeaves(t *testing.T) {
	for name, size := range map[string]int{"small body": 7, "large body": 1 << 20} {
		t.Run(name, func(t *testing.T) {
			runModes(t, func(t *testing.T, m mode) {
				ev := newEvents()
				in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{
					HangPercent: 100, Limit: faultinject.Limit{Concurrency: 1},
				}})
				h, returned := signalReturn(in.Handler(nil))
				srv, c := serveMode(t, m, h)
				t.Cleanup(in.Close) // before the server's Close, which waits for the handlers

				ctx, cancel := context.WithCancel(context.Background())
				res := make(chan result, 1)
				go func() {
					res <- doBody(ctx, c, http.MethodPost, srv.URL, bytes.NewReader(bytes.Repeat([]byte("x"), size)))
				}()
				ev.waitFor(t, faultinject.Hang)
				cancel() // the client leaves
				if r := recv(t, res); !clientLeft(r) {
					t.Fatalf("client got %+v, want context.Canceled", r)
				}
				recv(t, returned) // the hang ended
				if s := in.Snapshot(); s.Hangs != 1 || s.Hanging != 0 || s.InFlight != 0 {
					t.Fatalf("after the client left: %+v", s)
				}
				// The slot is free: with the hang gone, the next request passes.
				if err := in.Update(faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1}}); err != nil {
					t.Fatal(err)
				}
				r := get(t, c, srv.URL)
				if r.err != nil || r.status != http.StatusOK {
					t.Fatalf("next request: %+v, want 200", r)
				}
				wantProto(t, m, r)
			})
		})
	}
}

// Injector.Close still ends a hung POST whose body is being drained, with
// the "closed" answer, and no goroutine outlives the handler (goleak).
func TestCloseEndsHungPostWithUnreadBody(t *testing.T) {
	runModes(t, func(t *testing.T, m mode) {
		ev := newEvents()
		in := faultinject.New(faultinject.Config{OnEvent: ev.record, Rules: faultinject.Rules{HangPercent: 100}})
		srv, c := serveMode(t, m, in.Handler(nil))
		res := make(chan result, 1)
		go func() {
			res <- doBody(context.Background(), c, http.MethodPost, srv.URL, strings.NewReader("payload"))
		}()
		ev.waitFor(t, faultinject.Hang)
		in.Close()
		r := recv(t, res)
		if r.err != nil || r.status != faultinject.DefaultStatus || r.header.Get(faultinject.HeaderFault) != "closed" {
			t.Fatalf("got %+v, want 503 closed", r)
		}
		wantProto(t, m, r)
	})
}

// cancelable is a middleware whose context the test ends while the client
// stays connected, like a deadline set by a middleware in front of the
// Injector. Each request hands its cancel function to the test.
func cancelable(h http.Handler) (http.Handler, <-chan context.CancelFunc) {
	ch := make(chan context.CancelFunc, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		ch <- cancel
		h.ServeHTTP(w, r.WithContext(ctx))
	}), ch
}

// A request whose context a middleware ends while the client is still
// connected is answered with its injected status or 503, never with an
// empty 200 (#26 item 7).
func TestHandlerAnswersRequestsCanceledByAMiddleware(t *testing.T) {
	cases := []struct {
		name  string
		rules faultinject.Rules
		// wait returns once the request is where the context is to end.
		wait       func(t *testing.T, clk *clocktest.Fake, ev *events)
		queued     bool // a first request holds the only slot
		status     int
		retryAfter string
	}{
		{name: "hang", rules: faultinject.Rules{HangPercent: 100},
			wait:   func(t *testing.T, _ *clocktest.Fake, ev *events) { ev.waitFor(t, faultinject.Hang) },
			status: 503},
		{name: "outage hang", rules: faultinject.Rules{Outages: []faultinject.Window{{End: time.Hour, Action: faultinject.Hang, Status: 502}}},
			wait:   func(t *testing.T, _ *clocktest.Fake, ev *events) { ev.waitFor(t, faultinject.Hang) },
			status: 502},
		{name: "latency", rules: faultinject.Rules{Latency: time.Second},
			wait:   func(t *testing.T, clk *clocktest.Fake, _ *events) { clk.BlockUntil(1) },
			status: 503},
		{name: "latency before an abort", rules: faultinject.Rules{Latency: time.Second, Abort: faultinject.AbortRule{Percent: 100, Status: 429, RetryAfter: 2 * time.Second}},
			wait:   func(t *testing.T, clk *clocktest.Fake, _ *events) { clk.BlockUntil(1) },
			status: 429, retryAfter: "2"},
		{name: "queued", rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1, Queue: 1, Status: 429, RetryAfter: time.Second}},
			wait:   func(t *testing.T, _ *clocktest.Fake, ev *events) { ev.waitFor(t, faultinject.Queue) },
			queued: true, status: 429, retryAfter: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runModes(t, func(t *testing.T, m mode) {
				clk := clocktest.NewFake()
				ev := newEvents()
				g := newGate()
				in := faultinject.New(faultinject.Config{Clock: clk, OnEvent: ev.record, Rules: tc.rules})
				h, cancels := cancelable(in.Handler(g))
				srv, c := serveMode(t, m, h)
				t.Cleanup(in.Close)
				t.Cleanup(func() { close(g.release) })
				var first <-chan result
				if tc.queued {
					first = goDo(context.Background(), c, srv.URL)
					recv(t, g.entered)
					recv(t, cancels) // the first request's: left alone
				}
				res := goDo(context.Background(), c, srv.URL)
				cancel := recv(t, cancels)
				tc.wait(t, clk, ev)
				cancel() // the middleware's deadline ends the request; the client waits on
				r := recv(t, res)
				if r.err != nil || r.status != tc.status || r.header.Get(faultinject.HeaderFault) != "canceled" ||
					r.header.Get("Retry-After") != tc.retryAfter || !strings.Contains(r.body, "canceled") {
					t.Fatalf("got %+v, want %d canceled with Retry-After %q", r, tc.status, tc.retryAfter)
				}
				wantProto(t, m, r)
				if s := in.Snapshot(); s.Canceled+s.Hangs != 1 {
					t.Fatalf("counters %+v", s)
				}
				if first != nil {
					g.release <- struct{}{}
					if r := recv(t, first); r.status != http.StatusOK {
						t.Fatalf("first request: %+v", r)
					}
				}
			})
		})
	}
}

func TestUpdateWithEpochRefusesInvalidRules(t *testing.T) {
	clk := clocktest.NewFake()
	in := faultinject.New(faultinject.Config{Clock: clk, Rules: faultinject.Rules{Latency: time.Second}})
	old := in.Epoch()
	if err := in.UpdateWithEpoch(faultinject.Rules{Latency: -1}, old.Add(time.Hour)); !errors.Is(err, faultinject.ErrInvalidRules) {
		t.Fatalf("UpdateWithEpoch(invalid) = %v", err)
	}
	if in.Rules().Latency != time.Second || !in.Epoch().Equal(old) {
		t.Fatal("a refused UpdateWithEpoch changed the rules or the epoch")
	}
	at := old.Add(time.Minute)
	if err := in.UpdateWithEpoch(faultinject.Rules{Jitter: time.Second}, at); err != nil {
		t.Fatal(err)
	}
	if r := in.Rules(); r.Jitter != time.Second || r.Latency != 0 || !in.Epoch().Equal(at) {
		t.Fatalf("rules %+v, epoch %v", r, in.Epoch())
	}
	var nilIn *faultinject.Injector
	if err := nilIn.UpdateWithEpoch(faultinject.Rules{}, at); err != nil {
		t.Fatal(err)
	}
}

// echo answers with the request body it reads.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(b)
})

// A queued or delayed POST whose body was never read leaves the queue or
// the latency when its client leaves (#26 item 6, the limiter's queue);
// one that passes hands its body on intact, whether it was read ahead (up
// to 64 KiB of known length) or not.
func TestHandlerQueuedOrDelayedPostEndsWhenClientLeaves(t *testing.T) {
	runModes(t, func(t *testing.T, m mode) {
		clk := clocktest.NewFake()
		ev := newEvents()
		g := newGate()
		in := faultinject.New(faultinject.Config{Clock: clk, OnEvent: ev.record, Rules: faultinject.Rules{
			Limit: faultinject.Limit{Concurrency: 1, Queue: 2},
		}})
		h, returned := signalReturn(in.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/gate" {
				g.ServeHTTP(w, r)
				return
			}
			echo.ServeHTTP(w, r)
		})))
		srv, c := serveMode(t, m, h)
		t.Cleanup(in.Close)
		t.Cleanup(func() { close(g.release) })
		post := func(ctx context.Context, body string) <-chan result {
			ch := make(chan result, 1)
			go func() { ch <- doBody(ctx, c, http.MethodPost, srv.URL+"/echo", strings.NewReader(body)) }()
			return ch
		}

		// Queued, then the client leaves.
		first := goDo(context.Background(), c, srv.URL+"/gate")
		recv(t, g.entered)
		ctx, cancel := context.WithCancel(context.Background())
		queued := post(ctx, "a queued body")
		ev.waitFor(t, faultinject.Queue)
		cancel()
		if r := recv(t, queued); !clientLeft(r) {
			t.Fatalf("queued POST: %+v", r)
		}
		ev.waitFor(t, faultinject.Cancel)
		recv(t, returned)
		if s := in.Snapshot(); s.Waiting != 0 || s.Canceled != 1 || s.InFlight != 1 {
			t.Fatalf("after the queued client left: %+v", s)
		}

		// Queued, then granted: the bodies arrive intact, read ahead or not.
		small, large := strings.Repeat("s", 1000), strings.Repeat("L", 200<<10)
		smallRes := post(context.Background(), small)
		ev.waitFor(t, faultinject.Queue)
		largeRes := post(context.Background(), large)
		ev.waitFor(t, faultinject.Queue)
		g.release <- struct{}{}
		for _, tc := range []struct {
			ch   <-chan result
			want string
		}{{first, "ok"}, {smallRes, small}, {largeRes, large}} {
			if r := recv(t, tc.ch); r.err != nil || r.status != 200 || r.body != tc.want {
				t.Fatalf("got status %d, %d bytes, %v; want %d bytes", r.status, len(r.body), r.err, len(tc.want))
			}
		}

		// Delayed, then the client leaves: the latency ends without the
		// clock moving.
		if err := in.Update(faultinject.Rules{Latency: time.Hour}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			recv(t, returned)
		}
		ctx, cancel = context.WithCancel(context.Background())
		delayed := post(ctx, "a delayed body")
		clk.BlockUntil(1)
		cancel()
		recv(t, delayed)
		if e := ev.waitFor(t, faultinject.Cancel); e.Delay != 0 {
			t.Fatalf("cancel event %+v", e)
		}
		recv(t, returned)
		if s := in.Snapshot(); s.InFlight != 0 || s.Canceled != 2 || s.Passed != 3 {
			t.Fatalf("counters %+v", s)
		}
	})
}
