package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
)

// guardAdmin wraps the admin handler h with the checks every admin request
// passes before it:
//
//   - Host: the Host header must name the admin listener — bound, the IP it
//     is bound to (any IP literal when bound to every address, any
//     loopback IP when bound to loopback), the host given with -admin,
//     "localhost" or a name under ".localhost". A browser page whose name
//     an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own name
//     and is refused with 403. The port is not checked, so that port
//     forwarding keeps working.
//   - Token: when token is set, every request but GET /healthz must carry
//     "Authorization: Bearer <token>"; others get 401. The comparison takes
//     the same time whatever the token sent.
func guardAdmin(h http.Handler, bound net.Addr, configured, token string) http.Handler {
	var boundIP net.IP
	if ta, ok := bound.(*net.TCPAddr); ok {
		boundIP = ta.IP
	}
	configuredHost, _, _ := net.SplitHostPort(configured)
	var want [sha256.Size]byte
	if token != "" {
		want = sha256.Sum256([]byte(token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowedHost(r.Host, boundIP, configuredHost) {
			writeError(w, http.StatusForbidden, errors.New("faultproxy: admin API: Host header does not name this server (DNS rebinding guard)"))
			return
		}
		if token != "" && !(r.Method == http.MethodGet && r.URL.Path == "/healthz") {
			got, ok := bearer(r.Header.Get("Authorization"))
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="faultproxy admin"`)
				writeError(w, http.StatusUnauthorized, errors.New("faultproxy: admin API: missing or wrong bearer token"))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" value.
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// allowedHost reports whether a Host header value names the admin
// listener bound to boundIP (see guardAdmin).
func allowedHost(hostport string, boundIP net.IP, configured string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if configured != "" && strings.EqualFold(host, strings.TrimSuffix(configured, ".")) {
		return true
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return false
	case boundIP == nil:
		return false
	case boundIP.IsUnspecified():
		return true // bound to every address: any IP literal names it
	case boundIP.IsLoopback():
		return ip.IsLoopback()
	default:
		return ip.Equal(boundIP)
	}
}
