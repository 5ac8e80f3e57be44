package faultinject_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// boom is the value the tests' callbacks panic with.
type boom struct{ site string }

// catch runs f and returns the value it panicked with (nil: none).
func catch(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// panicky is a Config.OnEvent that panics, once armed, on the first event
// with the armed action.
type panicky struct {
	armed atomic.Int32 // Action+1; 0: disarmed
}

func (p *panicky) arm(a faultinject.Action) { p.armed.Store(int32(a) + 1) }

func (p *panicky) onEvent(e faultinject.Event) {
	if a := p.armed.Load(); a != 0 && faultinject.Action(a-1) == e.Action && p.armed.CompareAndSwap(a, 0) {
		panic(boom{"OnEvent " + e.Action.String()})
	}
}

// panicClock is a Fake whose Now, Since or NewTimer panics once armed, and
// whose timers' C panics when armed with "C".
type panicClock struct {
	*clocktest.Fake
	mu    sync.Mutex
	armed string
}

func (c *panicClock) arm(method string) {
	c.mu.Lock()
	c.armed = method
	c.mu.Unlock()
}

func (c *panicClock) hit(method string) {
	c.mu.Lock()
	fire := c.armed == method
	if fire {
		c.armed = ""
	}
	c.mu.Unlock()
	if fire {
		panic(boom{"Clock." + method})
	}
}

func (c *panicClock) Now() time.Time                  { c.hit("Now"); return c.Fake.Now() }
func (c *panicClock) Since(t time.Time) time.Duration { c.hit("Since"); return c.Fake.Since(t) }
func (c *panicClock) NewTimer(d time.Duration) clock.Timer {
	c.hit("NewTimer")
	return &panicTimer{Timer: c.Fake.NewTimer(d), c: c}
}

type panicTimer struct {
	clock.Timer
	c *panicClock
}

func (t *panicTimer) C() <-chan time.Time { t.c.hit("C"); return t.Timer.C() }
func (t *panicTimer) Stop() bool          { t.c.hit("Stop"); return t.Timer.Stop() }

// side runs requests through one side of an Injector, in process: the
// Handler on a ResponseRecorder, or the Transport with a stub next.
type side struct {
	name string
	// do sends one request with ctx and body (nil: none) through in, to a
	// next that calls next (nil: answers 200 at once), and returns its
	// status (0: an error) and the value it panicked with.
	do func(in *faultinject.Injector, ctx context.Context, body io.ReadCloser, next func()) (status int, panicked any)
}

var sides = []side{
	{name: "handler", do: func(in *faultinject.Injector, ctx context.Context, body io.ReadCloser, next func()) (int, any) {
		h := in.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if next != nil {
				next()
			}
			_, _ = io.WriteString(w, "ok")
		}))
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://x/", nil)
		if body != nil {
			r.Body = body
		}
		rec := httptest.NewRecorder()
		v := catch(func() { h.ServeHTTP(rec, r) })
		return rec.Code, v
	}},
	{name: "transport", do: func(in *faultinject.Injector, ctx context.Context, body io.ReadCloser, next func()) (int, any) {
		tr := in.Transport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			if next != nil {
				next()
			}
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
		}))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/", nil)
		if body != nil {
			req.Body = body
		}
		var resp *http.Response
		var err error
		v := catch(func() { resp, err = tr.RoundTrip(req) })
		if v != nil || err != nil {
			return 0, v
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}},
}

// closeBody is a request body that records whether it was closed.
type closeBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeBody) Close() error { b.closed.Store(true); return nil }

// idle fails the test unless the Injector holds nothing: no slot taken,
// no waiter queued, nothing counted as hanging, every request settled
// (counted by one final action, or as Panicked).
func idle(t *testing.T, in *faultinject.Injector, when string) {
	t.Helper()
	if s := in.Snapshot(); s.InFlight != 0 || s.Waiting != 0 || s.Hanging != 0 || s.Settled() != s.Requests {
		t.Fatalf("%s: in flight %d, waiting %d, hanging %d, settled %d of %d; want nothing held, all settled (counters %+v)",
			when, s.InFlight, s.Waiting, s.Hanging, s.Settled(), s.Requests, s)
	}
}

// followUp proves the Injector's capacity is intact: with rules (one slot,
// a queue of one) restored, a request passes at once, without queueing,
// and afterwards nothing is held.
func followUp(t *testing.T, sd side, in *faultinject.Injector) {
	t.Helper()
	if err := in.Update(faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1, Queue: 1}}); err != nil {
		t.Fatal(err)
	}
	before := in.Snapshot().Queued
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	status, v := sd.do(in, ctx, nil, nil)
	if v != nil || status != 200 {
		t.Fatalf("follow-up request: status %d, panic %v; want 200", status, v)
	}
	if q := in.Snapshot().Queued - before; q != 0 {
		t.Fatalf("follow-up request queued: a slot was lost")
	}
	idle(t, in, "after the follow-up")
}

// TestOnEventPanicReleasesEverything: whatever event Config.OnEvent panics
// on, on either side, the panic reaches the caller unchanged and the
// Injector holds nothing afterwards — no slot, no queued waiter, no
// Hanging count, the request body closed (client side, for a request the
// Injector does not send) — and the next request gets the slot at once.
// Before the fix a panic on Queue left the waiter queued, so the next
// freed slot went to the dead request; a panic on Hang left Hanging
// raised.
func TestOnEventPanicReleasesEverything(t *testing.T) {
	type tc struct {
		action faultinject.Action
		rules  faultinject.Rules
		hold   bool // a first request holds the only slot meanwhile
		cancel bool // the request's context has ended
	}
	cases := []tc{
		{action: faultinject.Queue, rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1, Queue: 1}}, hold: true},
		{action: faultinject.Reject, rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1}}, hold: true},
		{action: faultinject.Pass, rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1, Queue: 1}}},
		{action: faultinject.Abort, rules: faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100}, Limit: faultinject.Limit{Concurrency: 1}}},
		{action: faultinject.Reset, rules: faultinject.Rules{ResetPercent: 100, Limit: faultinject.Limit{Concurrency: 1}}},
		{action: faultinject.Hang, rules: faultinject.Rules{HangPercent: 100, Limit: faultinject.Limit{Concurrency: 1}}},
		{action: faultinject.Cancel, rules: faultinject.Rules{Latency: time.Hour, Limit: faultinject.Limit{Concurrency: 1}}, cancel: true},
	}
	for _, sd := range sides {
		for _, c := range cases {
			t.Run(sd.name+"/"+c.action.String(), func(t *testing.T) {
				p := &panicky{}
				in := faultinject.New(faultinject.Config{Rules: c.rules, Clock: clocktest.NewFake(), OnEvent: p.onEvent})
				defer in.Close()
				var holder chan struct{}
				release := make(chan struct{})
				if c.hold {
					entered := make(chan struct{})
					holder = make(chan struct{})
					go func() {
						defer close(holder)
						sd.do(in, context.Background(), nil, func() { close(entered); <-release })
					}()
					recv(t, entered)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if c.cancel {
					cancel()
				}
				body := &closeBody{Reader: strings.NewReader("payload")}
				p.arm(c.action)
				_, v := sd.do(in, ctx, body, nil)
				if v != (boom{"OnEvent " + c.action.String()}) {
					t.Fatalf("panic %v, want OnEvent's, re-raised", v)
				}
				if sd.name == "transport" && !body.closed.Load() {
					t.Fatal("request body not closed after the panic")
				}
				want := uint64(0) // a final event's panic: counted by that action
				if c.action == faultinject.Queue {
					want = 1 // no final action: counted as Panicked
				}
				if got := in.Snapshot().Panicked; got != want {
					t.Fatalf("Panicked = %d, want %d", got, want)
				}
				if c.hold {
					if s := in.Snapshot(); s.InFlight != 1 || s.Waiting != 0 || s.Hanging != 0 {
						t.Fatalf("after the panic: in flight %d, waiting %d, hanging %d; want 1 (the holder), 0, 0", s.InFlight, s.Waiting, s.Hanging)
					}
					close(release)
					recv(t, holder)
				}
				idle(t, in, "after the panic")
				followUp(t, sd, in)
			})
		}
	}
}

// TestNextPanicReleasesTheSlot: a panic in the wrapped handler or the next
// RoundTripper goes on to the caller, and the slot it held is freed.
func TestNextPanicReleasesTheSlot(t *testing.T) {
	for _, sd := range sides {
		t.Run(sd.name, func(t *testing.T) {
			in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{Limit: faultinject.Limit{Concurrency: 1, Queue: 1}}})
			defer in.Close()
			_, v := sd.do(in, context.Background(), nil, func() { panic(boom{"next"}) })
			if v != (boom{"next"}) {
				t.Fatalf("panic %v, want next's, re-raised", v)
			}
			idle(t, in, "after the panic")
			followUp(t, sd, in)
		})
	}
}

// TestClockPanicReleasesEverything: a Config.Clock that panics while a
// request waits in the queue (its timeout timer, the wait's measure) or
// is delayed (the latency timer) leaves nothing held: the waiter leaves
// the queue, a granted slot is freed, and the panic goes on.
func TestClockPanicReleasesEverything(t *testing.T) {
	type tc struct {
		name   string
		method string
		rules  faultinject.Rules
		hold   bool // a first request holds the only slot; the second queues
	}
	queue := faultinject.Limit{Concurrency: 1, Queue: 1, QueueTimeout: time.Hour}
	cases := []tc{
		{name: "queue-timer", method: "NewTimer", rules: faultinject.Rules{Limit: queue}, hold: true},
		{name: "queue-timer-C", method: "C", rules: faultinject.Rules{Limit: queue}, hold: true},
		{name: "queue-start", method: "Now", rules: faultinject.Rules{Limit: queue}, hold: true},
		{name: "queue-waited", method: "Since", rules: faultinject.Rules{Limit: queue}, hold: true},
		{name: "queue-timer-stop", method: "Stop", rules: faultinject.Rules{Limit: queue}, hold: true},
		{name: "latency-timer", method: "NewTimer", rules: faultinject.Rules{Latency: time.Second, Limit: faultinject.Limit{Concurrency: 1}}},
		{name: "latency-start", method: "Now", rules: faultinject.Rules{Latency: time.Second, Limit: faultinject.Limit{Concurrency: 1}}},
		{name: "outage-check", method: "Since", rules: faultinject.Rules{Outages: []faultinject.Window{{Start: time.Hour, End: 2 * time.Hour}}, Limit: faultinject.Limit{Concurrency: 1}}},
	}
	for _, sd := range sides {
		for _, c := range cases {
			t.Run(sd.name+"/"+c.name, func(t *testing.T) {
				clk := &panicClock{Fake: clocktest.NewFake()}
				ev := make(chan faultinject.Action, 16)
				in := faultinject.New(faultinject.Config{Rules: c.rules, Clock: clk, OnEvent: func(e faultinject.Event) {
					if e.Action == faultinject.Queue {
						ev <- e.Action
					}
				}})
				defer in.Close()
				release := make(chan struct{})
				var holder chan struct{}
				if c.hold {
					entered := make(chan struct{})
					holder = make(chan struct{})
					go func() {
						defer close(holder)
						sd.do(in, context.Background(), nil, func() { close(entered); <-release })
					}()
					recv(t, entered)
				}
				clk.arm(c.method)
				got := make(chan any, 1)
				body := &closeBody{Reader: strings.NewReader("payload")}
				go func() {
					_, v := sd.do(in, context.Background(), body, nil)
					got <- v
				}()
				if c.hold && (c.method == "Since" || c.method == "Stop") {
					// These come after the wait: let the waiter get the slot.
					recv(t, ev)
					clk.BlockUntil(1) // the queue timer is armed
					close(release)
					recv(t, holder)
				}
				v := recv(t, got)
				if v != (boom{"Clock." + c.method}) {
					t.Fatalf("panic %v, want the Clock's, re-raised", v)
				}
				if sd.name == "transport" && !body.closed.Load() {
					t.Fatal("request body not closed after the panic")
				}
				if got := in.Snapshot().Panicked; got != 1 {
					t.Fatalf("Panicked = %d, want 1", got)
				}
				if c.hold && holder != nil {
					select {
					case <-holder:
					default:
						if s := in.Snapshot(); s.InFlight != 1 || s.Waiting != 0 {
							t.Fatalf("after the panic: in flight %d, waiting %d; want 1 (the holder), 0", s.InFlight, s.Waiting)
						}
						close(release)
						recv(t, holder)
					}
				}
				idle(t, in, "after the panic")
				if n := clk.Pending(); n != 0 && c.method != "Stop" { // a Stop that panicked stopped nothing
					t.Fatalf("%d timers left pending", n)
				}
				followUp(t, sd, in)
			})
		}
	}
}
