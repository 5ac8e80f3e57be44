package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// hopHeader is added to every request the proxy forwards, naming the
// proxy instance (a random ID drawn at start). A request that arrives
// carrying the proxy's own ID has gone round a loop — an upstream that
// leads back to the proxy through another proxy, a name or a port forward
// — and is answered 508 Loop Detected without being forwarded again.
// Several faultproxies in a row each add their own ID, so a chain is not
// a loop; a request that has passed more than maxHops of them is refused
// the same way.
const hopHeader = "Faultproxy-Hop"

// maxHops bounds the faultproxy hops a request may have made.
const maxHops = 16

// newHopID returns a random ID for this proxy instance.
func newHopID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// loopGuard answers 508 to a request that went through the proxy already
// (it carries the hop ID id) or through more than maxHops faultproxies,
// and hands every other request to h.
func loopGuard(id string, h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops := 0
		for _, v := range r.Header.Values(hopHeader) {
			for f := range strings.SplitSeq(v, ",") {
				hops++
				if strings.TrimSpace(f) != id && hops <= maxHops {
					continue
				}
				log.Warn("loop detected; request not forwarded", "method", r.Method, "path", r.URL.Path, "hops", hops)
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusLoopDetected)
				_, _ = io.WriteString(w, "faultproxy: loop detected: the request went through this proxy already, or through more than 16 faultproxies (does -upstream lead back to the proxy?)\n")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// upstreamIsSelf reports whether the upstream u names the address bound
// (the proxy's listener), so that every request would be forwarded to the
// proxy itself: same port, and a host that is the bound IP (any local IP
// when bound to every address; 0.0.0.0 and :: reach the local host). A
// host name is resolved, within a second; a name that does not resolve
// is left to the hop header.
func upstreamIsSelf(u *url.URL, bound net.Addr) bool {
	ta, ok := bound.(*net.TCPAddr)
	if !ok {
		return false
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if port != strconv.Itoa(ta.Port) {
		return false
	}
	var ips []net.IP
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, u.Hostname())
		if err != nil {
			return false
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		switch {
		case ip.Equal(ta.IP):
			return true
		case ip.IsUnspecified(): // connects to the local host
			if ta.IP.IsLoopback() || ta.IP.IsUnspecified() || isLocalIP(ta.IP) {
				return true
			}
		case ta.IP.IsUnspecified():
			if ip.IsLoopback() || isLocalIP(ip) {
				return true
			}
		}
	}
	return false
}

// isLocalIP reports whether ip is an address of one of the host's
// interfaces.
func isLocalIP(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
