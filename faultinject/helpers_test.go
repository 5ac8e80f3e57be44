package faultinject_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

// testTimeout bounds every wait of a test on a channel, so that a bug
// fails the test instead of hanging it. It is never slept on.
const testTimeout = 10 * time.Second

// newClient returns a client whose every request uses a fresh connection,
// so that server-side resets are not hidden by the Transport's retry of
// idempotent requests on reused connections.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// serve starts a loopback test server running h and closes it (waiting for
// its handlers) at the end of the test.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// result is what a request ended with.
type result struct {
	proto  string
	status int
	header http.Header
	body   string
	err    error
}

// clientLeft reports whether r is what a client that cancelled its
// request may get: its context's error or, when the injector's answer to
// the departed caller (503 with HeaderFault "canceled") wins the race with
// the closing connection, that answer. It can over TLS, where closing a
// connection first sends an alert, which the server reads as the client
// leaving, and the reply may still be read before the socket closes.
func clientLeft(r result) bool {
	if errors.Is(r.err, context.Canceled) {
		return true
	}
	return r.err == nil && r.status == http.StatusServiceUnavailable && r.header.Get(faultinject.HeaderFault) == "canceled"
}

func do(ctx context.Context, c *http.Client, method, url string) result {
	return doBody(ctx, c, method, url, nil)
}

// doBody sends a request with body (nil: none) and reads the response.
func doBody(ctx context.Context, c *http.Client, method, url string, body io.Reader) result {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return result{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{proto: resp.Proto, status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func get(t *testing.T, c *http.Client, url string) result {
	t.Helper()
	return do(context.Background(), c, http.MethodGet, url)
}

// goDo runs a request in its own goroutine and returns a channel that
// delivers its result.
func goDo(ctx context.Context, c *http.Client, url string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- do(ctx, c, http.MethodGet, url) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting on a channel")
		panic("unreachable")
	}
}

// events passes the Injector's events to a test waiting for one.
type events struct{ ch chan faultinject.Event }

func newEvents() *events { return &events{ch: make(chan faultinject.Event, 1024)} }

func (e *events) record(ev faultinject.Event) { e.ch <- ev }

// waitFor returns the next event with action a, skipping others.
func (e *events) waitFor(t *testing.T, a faultinject.Action) faultinject.Event {
	t.Helper()
	for {
		ev := recv(t, e.ch)
		if ev.Action == a {
			return ev
		}
	}
}

// gate is a handler that signals each entry and blocks until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
	_, _ = io.WriteString(w, "ok")
}

// gated is a loopback server whose handler is a gate, behind an Injector
// that reports its events: the setup of the tests of the Limit.
type gated struct {
	in  *faultinject.Injector
	ev  *events
	g   *gate
	srv *httptest.Server
	c   *http.Client
}

// newGated starts a gated server whose Injector is configured by cfg, with
// cfg.OnEvent set to record the events.
func newGated(t *testing.T, cfg faultinject.Config) *gated {
	t.Helper()
	s := &gated{ev: newEvents(), g: newGate()}
	cfg.OnEvent = s.ev.record
	s.in = faultinject.New(cfg)
	s.srv = serve(t, s.in.Handler(s.g))
	s.c = newClient(t)
	return s
}

// send sends a request with ctx in its own goroutine (see goDo).
func (s *gated) send(ctx context.Context) <-chan result { return goDo(ctx, s.c, s.srv.URL) }

// enter sends a request and waits until it is inside the gate.
func (s *gated) enter(t *testing.T) <-chan result {
	t.Helper()
	ch := s.send(context.Background())
	recv(t, s.g.entered)
	return ch
}
