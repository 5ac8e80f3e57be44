package httpretry

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// WithKey sets the function that gives each request its key, for a policy
// whose Breaker, Budget, NestedBudget or Limiter is a group of members per
// key (keyed.Breakers, keyed.Budgets, keyed.Limiters): the request's
// calls use the members of its key, and its attempts run with a context
// carrying it (keyed.KeyFrom), which the next RoundTripper and the
// policy's Observer can read. The empty key is the groups' default
// member.
//
// Without WithKey (or with a nil f), a request under a policy with groups
// uses the key its context already carries (keyed.WithKey), else HostKey;
// a request under a policy without groups gets no key. f is called once
// per request, before anything is sent; if it panics, nothing is sent,
// the request's body is closed and the panic goes on.
func WithKey(f func(*http.Request) string) Option {
	return func(o *options) { o.key = f }
}

// HostKey is the default key: the request URL's scheme, host and port,
// lower case, with the scheme's port when the URL names none
// ("https://example.com:443"). A request without a URL has the empty key.
func HostKey(req *http.Request) string {
	u := req.URL
	if u == nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := u.Hostname(), u.Port()
	if port == "" {
		switch scheme {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		}
	}
	if host == "" && port == "" {
		return scheme
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(host), port)
}

// keyContext returns the context the request's calls run with: req's,
// carrying the request's key when it has one, and replaces p's groups by
// that key's members (retry.ResolveGroups).
func (t *Transport) keyContext(req *http.Request, p *retry.Policy) context.Context {
	ctx := req.Context()
	f := t.opts.key
	if f == nil {
		if !retry.HasGroups(p) {
			return ctx
		}
		if _, ok := keyed.Lookup(ctx); ok {
			retry.ResolveGroups(ctx, p)
			return ctx
		}
		f = HostKey
	}
	ctx = keyed.WithKey(ctx, f(req))
	retry.ResolveGroups(ctx, p)
	return ctx
}
