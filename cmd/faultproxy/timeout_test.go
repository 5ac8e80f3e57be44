package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The admin server bounds how long a request may take to arrive and how
// long an idle connection stays, so that a slow PUT body cannot hold a
// connection (and a goroutine) forever (issue 32 item 17).
func TestAdminServerHasReadAndIdleTimeouts(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	if len(p.servers) != 2 {
		t.Fatalf("%d servers, want the proxy and the admin", len(p.servers))
	}
	admin := p.servers[1]
	if admin.ReadHeaderTimeout <= 0 || admin.ReadTimeout <= 0 || admin.IdleTimeout <= 0 {
		t.Fatalf("admin server: read header %v, read %v, idle %v; want all set",
			admin.ReadHeaderTimeout, admin.ReadTimeout, admin.IdleTimeout)
	}
	if proxy := p.servers[0]; proxy.ReadHeaderTimeout <= 0 || proxy.IdleTimeout <= 0 {
		t.Fatalf("proxy server: read header %v, idle %v; want both set", proxy.ReadHeaderTimeout, proxy.IdleTimeout)
	}
}

// A PUT /rules whose body never finishes is cut by the admin's read
// timeout: the server closes the connection, and the rules stay. The
// test waits for the close (a watchdog bounds the wait), not for a time.
func TestAdminSlowPutBodyIsCut(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), adminReadTimeout: 50 * time.Millisecond}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.adminURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers announce 100 bytes; 10 come, then nothing.
	fmt.Fprintf(conn, "PUT /rules HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/yaml\r\nContent-Length: 100\r\n\r\nabort: {pe")
	_ = conn.SetReadDeadline(time.Now().Add(testTimeout)) // watchdog only
	resp, err := io.ReadAll(bufio.NewReader(conn))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the admin server still holds the connection of a stalled body after %v", testTimeout)
	}
	if strings.HasPrefix(string(resp), "HTTP/1.1 200") {
		t.Fatalf("a truncated body was applied: %q", resp)
	}
	if r := get(client(t), p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("after the stalled PUT: %+v", r)
	}
}
