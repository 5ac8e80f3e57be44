package layer_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/layer"
)

func newAdmission(t *testing.T, c admission.Config) *admission.Limiter {
	t.Helper()
	l, err := admission.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// quietServer is a real loopback server that does not log handler panics.
func quietServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func wantOverload(t *testing.T, resp *http.Response, err error, retryAfter string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != retryAfter || resp.Header.Get(layer.HeaderOverloaded) != "1" {
		t.Fatalf("status %d, Retry-After %q, %s %q; want 503, %q, 1", resp.StatusCode, resp.Header.Get("Retry-After"), layer.HeaderOverloaded, resp.Header.Get(layer.HeaderOverloaded), retryAfter)
	}
}

func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

func TestAdaptiveShedsWithOverloadAnswer(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1})
	release := make(chan struct{})
	srv := quietServer(t, layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	})), layer.WithRetryAfter(3*time.Second)))
	done := make(chan error, 1)
	go func() { _, err := get(t, srv.URL); done <- err }()
	waitFor(func() bool { return l.InFlight() == 1 })
	resp, err := get(t, srv.URL)
	wantOverload(t, resp, err, "3") // Middleware's WithRetryAfter reaches Adaptive
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.Stats().Shed[admission.ReasonLimit] != 1 {
		t.Fatalf("stats %+v, want one shed for the limit", l.Stats())
	}
}

func TestAdaptiveReleasesSlotWhenHandlerPanics(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1})
	srv := quietServer(t, layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("handler bug")
		}
	})))
	for range 3 {
		if _, err := get(t, srv.URL+"/panic"); err == nil {
			t.Fatal("a panicking handler answered")
		}
	}
	waitFor(func() bool { return l.InFlight() == 0 }) // the server's goroutine ends after the client sees the reset
	resp, err := get(t, srv.URL+"/ok")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after panics: %v, %v; want 200 (the slot given back)", resp, err)
	}
}

func TestAdaptiveReleasesSlotWhenHandlerHijacks(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1})
	hold := make(chan struct{})
	srv := quietServer(t, layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hijack" {
			return
		}
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		rw.Flush()
		<-hold // the handler keeps the connection, as a websocket would
	})))
	defer close(hold)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "101") {
		t.Fatalf("hijacked answer %q, %v", line, err)
	}
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight while the handler holds a hijacked connection, want 0", n)
	}
	resp, err := get(t, srv.URL+"/ok")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("beside a hijacked connection: %v, %v; want 200", resp, err)
	}
}

// A request queued behind a busy slot whose caller's deadline (the
// Stormguard-Deadline-Ms that Middleware reads) passes is dropped before
// its handler runs.
func TestAdaptiveDropsQueuedRequestPastCallerDeadline(t *testing.T) {
	f := clocktest.NewFake()
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1})
	release := make(chan struct{})
	var served []string
	srv := quietServer(t, layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.Path) // one at a time: the limit is 1
		if r.URL.Path == "/slow" {
			<-release
		}
	})), layer.WithClock(f)))
	done := make(chan error, 1)
	go func() { _, err := get(t, srv.URL+"/slow"); done <- err }()
	waitFor(func() bool { return l.InFlight() == 1 })
	type answer struct {
		resp *http.Response
		err  error
	}
	late := make(chan answer, 1)
	go func() {
		resp, err := get(t, srv.URL+"/late", layer.HeaderDeadline, "20")
		late <- answer{resp, err}
	}()
	waitFor(func() bool { return l.Queued() == 1 })
	f.Advance(20 * time.Millisecond) // the caller's deadline passes; the queue would allow 100ms
	a := <-late
	wantOverload(t, a.resp, a.err, "1")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(served) != 1 || served[0] != "/slow" {
		t.Fatalf("handlers run: %v, want only /slow", served)
	}
	if l.Stats().Shed[admission.ReasonCallerGone] != 1 {
		t.Fatalf("stats %+v, want one caller_gone", l.Stats())
	}
}

// TestAdaptiveShedsCallerGoneOnArrival (outside review): a caller whose
// deadline header leaves it no time (Stormguard-Deadline-Ms: 0) is shed
// with the overload answer before the handler runs, also below the limit
// with no queue in the way, as the CHANGELOG promised. (Before: the
// Limiter's path that admits at once never looked at the context, and
// the handler ran for a caller that had given up.)
func TestAdaptiveShedsCallerGoneOnArrival(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 10}, ProbeInterval: -1})
	ran := 0
	h := layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ })))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(layer.HeaderDeadline, "0")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ran != 0 || rec.Code != http.StatusServiceUnavailable || rec.Header().Get(layer.HeaderOverloaded) != "1" {
		t.Fatalf("handler ran %d times, answer %d %v; want no run and the overload answer", ran, rec.Code, rec.Header())
	}
	if s := l.Stats(); s.Shed[admission.ReasonCallerGone] != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v, want one caller_gone and nothing in flight", s)
	}
}

// heardLimit is a Limit that counts the samples it hears.
type heardLimit struct{ samples, drops int }

func (h *heardLimit) OnSample(_ time.Time, _ time.Duration, _ int, dropped bool) {
	h.samples++
	if dropped {
		h.drops++
	}
}
func (*heardLimit) Limit() int { return 10 }

// TestAdaptiveCallerDeadlineIsNoDrop (outside review): a request whose
// caller's deadline (Middleware's, from the header) passes while it is
// served is a sample but no drop, where one whose deadline is the
// server's own (a timeout set outside Adaptive) is a drop; with AIMD, a
// caller's short deadline header no longer halves the limit for everyone.
// (Before: every passed deadline was a drop: one such request per window
// pinned an idle server's AIMD limit at its minimum.)
func TestAdaptiveCallerDeadlineIsNoDrop(t *testing.T) {
	run := func(t *testing.T, alg admission.Limit, serverTimeout bool) *admission.Limiter {
		f := clocktest.NewFake()
		l := newAdmission(t, admission.Config{Limit: alg, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
		var h http.Handler = layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.Advance(2 * time.Millisecond) // 2 ms of work, past the 1 ms deadline
			w.WriteHeader(http.StatusOK)
		}))
		if serverTimeout {
			inner := h
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := clock.WithTimeout(r.Context(), f, time.Millisecond, nil)
				defer cancel()
				inner.ServeHTTP(w, r.WithContext(ctx))
			})
		}
		h = layer.Middleware(h, layer.WithClock(f))
		for range 10 {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if !serverTimeout {
				req.Header.Set(layer.HeaderDeadline, "1")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			f.Advance(10 * time.Millisecond)
		}
		if n := l.InFlight(); n != 0 {
			t.Fatalf("%d in flight", n)
		}
		return l
	}
	t.Run("caller's deadline", func(t *testing.T) {
		h := &heardLimit{}
		run(t, h, false)
		if h.samples == 0 || h.drops != 0 {
			t.Fatalf("%d samples (%d drops), want samples and no drop", h.samples, h.drops)
		}
		aimd, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 512, MinLimit: 1, MaxLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, aimd, false).Limit(); got < 512 {
			t.Fatalf("AIMD limit %d after 10 requests whose caller's deadline passed, want at least 512 (not lowered)", got)
		}
	})
	t.Run("server's deadline", func(t *testing.T) {
		h := &heardLimit{}
		run(t, h, true)
		if h.samples == 0 || h.drops != h.samples {
			t.Fatalf("%d samples, %d drops; want every sample a drop", h.samples, h.drops)
		}
	})
}

// panickyErr is an error whose Is panics: user code that errors.Is runs.
type panickyErr struct{}

func (panickyErr) Error() string { return "panicky" }
func (panickyErr) Is(error) bool { panic("Is bug") }

// errCtx is a request context (set by a user's handler outside Adaptive)
// whose Err reports a panicky error once armed.
type errCtx struct {
	context.Context
	armed *bool
}

func (c errCtx) Err() error {
	if *c.armed {
		return panickyErr{}
	}
	return c.Context.Err()
}

// TestAdaptiveJudgingPanicGivesSlotBack (outside review, callback
// panics): when judging how a request ended panics (its context's Err,
// errors.Is on what Err returns: user code), the slot is given back and
// the panic goes on. (Before: the request was marked served before it
// was judged, so the clean-up took the slot for ended: lost for good,
// and with a limit of 1 every later request was shed.)
func TestAdaptiveJudgingPanicGivesSlotBack(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, ProbeInterval: -1})
	armed, arm := false, true
	h := layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { armed = arm }))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(errCtx{r.Context(), &armed}))
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		outer.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the panic went on, want 0", n)
	}
	armed, arm = false, false
	rec := httptest.NewRecorder()
	outer.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("the next request: %d, want 200", rec.Code)
	}
}

// TestAdaptiveSlowServerPastCallerDeadlines (second outside review): an
// overloaded server whose latency climbs past its callers' deadlines must
// still be heard. Its requests, cut at the callers' deadlines, are samples
// of their time: AIMD's Timeout sees them and lowers the limit, and a
// latency-based algorithm hears the slow requests, not only the fast
// ones. (A first fix gave them no sample at all: the limit never reacted.)
func TestAdaptiveSlowServerPastCallerDeadlines(t *testing.T) {
	serve := func(t *testing.T, alg admission.Limit, slow func(i int) bool) *admission.Limiter {
		f := clocktest.NewFake()
		l := newAdmission(t, admission.Config{Limit: alg, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
		i := 0
		h := layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow(i) {
				f.Advance(2 * time.Second) // the overloaded server takes 2 s
			} else {
				f.Advance(10 * time.Millisecond)
			}
			w.WriteHeader(http.StatusOK)
		})), layer.WithClock(f))
		for ; i < 20; i++ {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(layer.HeaderDeadline, "1000") // callers wait 1 s
			h.ServeHTTP(httptest.NewRecorder(), req)
			f.Advance(10 * time.Millisecond)
		}
		return l
	}
	aimd, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 100, MinLimit: 1, MaxLimit: 1000, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := serve(t, aimd, func(int) bool { return true }).Limit(); got >= 100 {
		t.Errorf("AIMD limit %d after 20 requests of 2 s (Timeout 500 ms) cut at their callers' 1 s deadlines, want it lowered", got)
	}
	rec := &rttLimit{}
	serve(t, rec, func(i int) bool { return i%2 == 1 })
	if rec.max < time.Second {
		t.Errorf("the largest time the algorithm heard is %v, though half the requests ran to their callers' 1 s deadlines", rec.max)
	}
}

// rttLimit is a Limit that keeps the largest RTT it heard.
type rttLimit struct{ max time.Duration }

func (r *rttLimit) OnSample(_ time.Time, rtt time.Duration, _ int, _ bool) { r.max = max(r.max, rtt) }
func (*rttLimit) Limit() int                                               { return 10 }

// TestAdaptiveMaxDeadlineBoundIsADrop (second outside review): a request
// that reaches the server's own bound on its caller's deadline
// (WithMaxDeadline, cause ErrMaxDeadline) is a drop, as a deadline of the
// server's is, and as grpcretry's WithMaxInboundDeadline bound is.
func TestAdaptiveMaxDeadlineBoundIsADrop(t *testing.T) {
	f := clocktest.NewFake()
	h := &heardLimit{}
	l := newAdmission(t, admission.Config{Limit: h, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
	var cause error
	srv := layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Advance(2 * time.Second) // past the server's 1 s bound
		cause = context.Cause(r.Context())
		w.WriteHeader(http.StatusOK)
	})), layer.WithClock(f), layer.WithMaxDeadline(time.Second))
	for range 10 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(layer.HeaderDeadline, "3600000") // the caller would wait an hour
		srv.ServeHTTP(httptest.NewRecorder(), req)
		f.Advance(10 * time.Millisecond)
	}
	if h.samples == 0 || h.drops != h.samples {
		t.Fatalf("%d samples, %d drops after 10 requests that hit the server's WithMaxDeadline bound; want every one a drop", h.samples, h.drops)
	}
	if !errors.Is(cause, layer.ErrMaxDeadline) || !errors.Is(cause, layer.ErrInboundDeadline) {
		t.Fatalf("the bound's cause is %v, want ErrMaxDeadline, which wraps ErrInboundDeadline", cause)
	}
}

// TestAdaptiveCallerDeadlineThroughTimeoutHandler (third outside review):
// an http.TimeoutHandler inside Adaptive answers 503 when the caller's
// deadline (from its header) ends the request: that is no drop, or any
// caller could still halve an AIMD limit with a 1 ms deadline header. The
// context is judged before the status.
func TestAdaptiveCallerDeadlineThroughTimeoutHandler(t *testing.T) {
	aimd, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 512, MinLimit: 1, MaxLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	h := &heardLimit{}
	for _, alg := range []admission.Limit{h, aimd} {
		// The real clock: each request lasts its caller's 1 ms deadline,
		// and a window of 1 ms has passed by the next one's end.
		l := newAdmission(t, admission.Config{Limit: alg, ProbeInterval: -1, WindowSamples: 1, Window: time.Millisecond})
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the work outlasts the caller's deadline
		})
		srv := layer.Middleware(layer.Adaptive(l, http.TimeoutHandler(slow, time.Hour, "timeout")))
		for range 5 {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(layer.HeaderDeadline, "1") // the caller waits 1 ms (of the real clock)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want the TimeoutHandler's 503", rec.Code)
			}
		}
	}
	if h.samples == 0 || h.drops != 0 {
		t.Errorf("%d samples, %d drops, though only the callers' deadlines passed; want samples and no drop", h.samples, h.drops)
	}
	if got := aimd.Limit(); got < 512 {
		t.Errorf("AIMD limit %d after 5 requests whose callers' 1 ms deadlines passed, want at least 512", got)
	}
}

// TestCallerDeadlineEqualToBoundIsTheCallers (third outside review): a
// header asking exactly WithMaxDeadline's bound is the caller's deadline
// (cause ErrInboundDeadline, a served sample); only one asking for more is
// cut at the server's bound (ErrMaxDeadline, a drop).
func TestCallerDeadlineEqualToBoundIsTheCallers(t *testing.T) {
	for _, c := range []struct {
		ms    string
		bound bool
	}{{"999", false}, {"1000", false}, {"1001", true}} {
		f := clocktest.NewFake()
		h := &heardLimit{}
		l := newAdmission(t, admission.Config{Limit: h, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
		var cause error
		srv := layer.Middleware(layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.Advance(2 * time.Second) // past the deadline
			cause = context.Cause(r.Context())
			w.WriteHeader(http.StatusOK)
		})), layer.WithClock(f), layer.WithMaxDeadline(time.Second))
		for range 10 {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(layer.HeaderDeadline, c.ms)
			srv.ServeHTTP(httptest.NewRecorder(), req)
			f.Advance(10 * time.Millisecond)
		}
		if got := errors.Is(cause, layer.ErrMaxDeadline); got != c.bound || h.samples == 0 || (h.drops != 0) != c.bound {
			t.Errorf("header %s ms, bound 1 s: cause %v, %d of %d samples drops; want the bound's cause and drops: %v", c.ms, cause, h.drops, h.samples, c.bound)
		}
	}
}
