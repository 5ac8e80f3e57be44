package faultinject_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
)

// mode is a protocol a server-side test runs over, after net/http's own
// tests: one test body over every protocol, so that a behaviour that holds
// over HTTP/1.1 but not over HTTP/2 cannot hide.
type mode string

const (
	http1Mode  mode = "http1"  // HTTP/1.1 over plain TCP
	https1Mode mode = "https1" // HTTP/1.1 over TLS
	http2Mode  mode = "http2"  // HTTP/2 over TLS
)

var allModes = []mode{http1Mode, https1Mode, http2Mode}

// runModes runs f as a subtest over each mode.
func runModes(t *testing.T, f func(t *testing.T, m mode)) {
	t.Helper()
	for _, m := range allModes {
		t.Run(string(m), func(t *testing.T) { f(t, m) })
	}
}

// serveMode starts a loopback server running h over m and returns it with
// a client speaking m. Over HTTP/1.x the client uses a fresh connection
// per request (see newClient). The server is closed (waiting for its
// handlers) at the end of the test.
func serveMode(t *testing.T, m mode, h http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // aborted streams and resets are expected
	switch m {
	case http1Mode:
		srv.Start()
		t.Cleanup(srv.Close)
		return srv, newClient(t)
	case https1Mode:
		srv.StartTLS()
	case http2Mode:
		srv.EnableHTTP2 = true
		srv.StartTLS()
	}
	t.Cleanup(srv.Close)
	c := srv.Client()
	tr := c.Transport.(*http.Transport)
	tr.DisableKeepAlives = m == https1Mode
	t.Cleanup(tr.CloseIdleConnections)
	return srv, c
}

// wantProto checks that r came over m.
func wantProto(t *testing.T, m mode, r result) {
	t.Helper()
	want := "HTTP/1.1"
	if m == http2Mode {
		want = "HTTP/2.0"
	}
	if r.proto != want {
		t.Fatalf("response over %s, want %s (%s)", r.proto, want, m)
	}
}
