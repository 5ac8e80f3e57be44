package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// An upstream that names the proxy's own listener is refused at start:
// every request would be forwarded to the proxy itself, and one request
// used up the process's file descriptors (issue 32 item 16).
func TestStartRefusesItselfAsUpstream(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct{ listen, upstream string }{
		{"127.0.0.1:%d", "http://127.0.0.1:%d"},
		{"127.0.0.1:%d", "http://127.0.0.1:%d/some/path"},
		{"127.0.0.1:%d", "http://localhost:%d"},
		{"127.0.0.1:%d", "http://0.0.0.0:%d"},
	} {
		var err error
		for range 5 { // another process may take the free port first
			port := freePort(t)
			cfg := config{Listen: fmt.Sprintf(tc.listen, port), Admin: "off", Upstream: mustURL(t, fmt.Sprintf(tc.upstream, port))}
			var p *proxy
			p, err = start(cfg, log)
			if err == nil {
				_ = p.shutdown(t.Context())
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "itself") {
			t.Errorf("listen %s, upstream %s: %v, want a refusal naming the loop", tc.listen, tc.upstream, err)
		}
	}
	// Another port of the same host is an upstream like any other.
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	if r := get(client(t), p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("a proxy in front of a loopback upstream: %+v", r)
	}
}

// A loop the start check cannot see (through another proxy, a name, a
// port forward) is cut by the hop header: the proxy answers a request it
// has already forwarded with 508 Loop Detected, without forwarding it
// again (issue 32 item 16).
func TestProxyLoopIsDetectedByTheHopHeader(t *testing.T) {
	var target atomic.Pointer[string]
	var passes atomic.Int64
	// mirror forwards everything back to the proxy: a loop. It gives up
	// after a few passes, so that a proxy without the guard fails the
	// test instead of eating the machine's file descriptors.
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if passes.Add(1) > 5 {
			_, _ = io.WriteString(w, "looped")
			return
		}
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(mustURL(t, *target.Load()))
		}}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(mirror.Close)
	p := startProxy(t, config{Upstream: mustURL(t, mirror.URL)}, nil)
	target.Store(&p.proxyURL)
	r := get(client(t), p.proxyURL+"/a")
	if r.status != http.StatusLoopDetected {
		t.Fatalf("a request looping through the proxy: %+v, want 508", r)
	}
	if n := passes.Load(); n != 1 {
		t.Fatalf("the request went round %d times, want once", n)
	}

	// Two faultproxies in a row are not a loop.
	up := newUpstream(t)
	second := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	first := startProxy(t, config{Upstream: mustURL(t, second.proxyURL)}, nil)
	if r := get(client(t), first.proxyURL+"/b"); r.status != 200 || !strings.Contains(r.body, "upstream /b") {
		t.Fatalf("through two proxies: %+v", r)
	}

	// Foreign hops pass, up to maxHops of them.
	withHops := func(n int) result {
		req, _ := http.NewRequest(http.MethodGet, second.proxyURL+"/c", nil)
		for i := range n {
			req.Header.Add(hopHeader, fmt.Sprintf("other%d", i))
		}
		resp, err := client(t).Do(req)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, body: string(b)}
	}
	if r := withHops(maxHops); r.status != 200 {
		t.Fatalf("%d foreign hops: %+v", maxHops, r)
	}
	hits := up.hits.Load()
	if r := withHops(maxHops + 1); r.status != http.StatusLoopDetected || up.hits.Load() != hits {
		t.Fatalf("%d foreign hops: %+v (upstream hits %d → %d), want 508 without forwarding", maxHops+1, r, hits, up.hits.Load())
	}
}
