package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// An empty PUT /rules (what curl --data-binary @missing-file sends after a
// warning) is refused with 400 and the rules stay (#26 item 8).
func TestPutEmptyRulesIsRefused(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	c := client(t)
	if r := putRules(t, c, p, "", "abort: {percent: 100, status: 429}"); r.status != 200 {
		t.Fatalf("PUT abort: %+v", r)
	}
	for _, tc := range []struct{ contentType, body string }{
		{"", ""},
		{"application/x-www-form-urlencoded", ""}, // curl's default
		{"application/yaml", "\n  \n# only a comment\n"},
		{"application/yaml", "---\n"},
		{"application/json", ""},
		{"application/json", " \r\n"},
	} {
		r := putRules(t, c, p, tc.contentType, tc.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "empty rules") {
			t.Errorf("PUT %q (%s): %+v, want 400 empty rules", tc.body, tc.contentType, r)
		}
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 429 {
		t.Fatalf("after the refused PUTs: %+v, want the abort rule still in force", r)
	}
	// {} is the way to clear every fault.
	if r := putRules(t, c, p, "", "{}"); r.status != 200 {
		t.Fatalf("PUT {}: %+v", r)
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("after PUT {}: %+v", r)
	}
}

// hookClock is a fake clock that runs a hook, once, the next time Now is
// called: a test uses it to act in the middle of the admin's PUT.
type hookClock struct {
	*clocktest.Fake
	hook atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if h := c.hook.Swap(nil); h != nil {
		(*h)()
	}
	return c.Fake.Now()
}

// PUT /rules?restart=true changes the rules and the epoch in one step: a
// request that arrives while the PUT reads the clock sees the old rules or
// the new ones on the new schedule, never the new rules on the old
// schedule (#26 item 8).
func TestPutRulesRestartIsAtomic(t *testing.T) {
	up := newUpstream(t)
	clk := &hookClock{Fake: clocktest.NewFake()}
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), clock: clk}, nil)
	c := client(t)
	clk.Advance(time.Hour) // the epoch is an hour old
	// On the new schedule the outage answers 502; on the old one it is
	// long over and the abort answers 429; the old rules pass (200).
	const rules = "abort: {percent: 100, status: 429}\noutages: [{start: 0s, end: 10s, status: 502}]\n"
	seen := make(chan result, 1)
	hook := func() { seen <- get(c, p.proxyURL+"/during") }
	clk.hook.Store(&hook)
	if r := send(context.Background(), c, http.MethodPut, p.adminURL+"/rules?restart=true", "", rules); r.status != 200 {
		t.Fatalf("PUT ?restart=true: %+v", r)
	}
	select {
	case r := <-seen:
		if r.status != 200 && r.status != 502 {
			t.Fatalf("a request during PUT ?restart=true got %d %s (%s): the new rules on the old schedule",
				r.status, r.header.Get(faultinject.HeaderFault), r.body)
		}
	default:
		t.Fatal("the PUT did not read the clock")
	}
	if r := get(c, p.proxyURL+"/after"); r.status != 502 || r.header.Get(faultinject.HeaderFault) != "outage" {
		t.Fatalf("after the PUT: %+v, want the outage", r)
	}
}

// adminDo sends method path to the admin API with the given Host header
// ("" keeps the URL's) and Authorization header ("" sends none).
func adminDo(t *testing.T, c *http.Client, p *proxy, method, path, host, auth, body string) result {
	t.Helper()
	req, err := http.NewRequest(method, p.adminURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b), nil}
}

// The admin API answers only requests whose Host names it: a page whose
// name is re-pointed at 127.0.0.1 (DNS rebinding) is refused (#26 item 9).
func TestAdminRefusesForeignHostHeaders(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), Admin: "localhost:0"}, nil)
	c := client(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.adminURL, "http://"))
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port, "localhost.evil.example", "10.1.2.3:" + port, "[::]:" + port} {
		if r := adminDo(t, c, p, http.MethodGet, "/rules", host, "", ""); r.status != http.StatusForbidden {
			t.Errorf("GET /rules with Host %q: %d, want 403", host, r.status)
		}
		if r := adminDo(t, c, p, http.MethodPut, "/rules", host, "", "abort: {percent: 100}"); r.status != http.StatusForbidden {
			t.Errorf("PUT /rules with Host %q: %d, want 403", host, r.status)
		}
	}
	if rules := getRules(t, c, p, ""); !rules.IsZero() {
		t.Fatalf("a refused PUT changed the rules: %+v", rules)
	}
	for _, host := range []string{"", "localhost:" + port, "LocalHost.:" + port, "app.localhost:" + port, "127.0.0.1:" + port, "127.0.0.2", "[::1]:" + port, "localhost:9999"} {
		if r := adminDo(t, c, p, http.MethodGet, "/rules", host, "", ""); r.status != http.StatusOK {
			t.Errorf("GET /rules with Host %q: %d, want 200", host, r.status)
		}
	}
}

func getRules(t *testing.T, c *http.Client, p *proxy, auth string) faultinject.Rules {
	t.Helper()
	r := adminDo(t, c, p, http.MethodGet, "/rules", "", auth, "")
	rules, err := faultinject.ParseRules([]byte(r.body))
	if r.status != 200 || err != nil {
		t.Fatalf("GET /rules: %+v (%v)", r, err)
	}
	return rules
}

// With a token, every admin request but GET /healthz must carry it as a
// bearer token (#26 item 9).
func TestAdminRequiresTheToken(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), AdminToken: "s3cret-token"}, nil)
	c := client(t)
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer s3cret-toke", "Bearer s3cret-token2", "Basic czNjcmV0LXRva2Vu", "s3cret-token"} {
		for _, path := range []string{"/rules", "/counters"} {
			r := adminDo(t, c, p, http.MethodGet, path, "", auth, "")
			if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("GET %s with Authorization %q: %d %v, want 401 with WWW-Authenticate", path, auth, r.status, r.header)
			}
		}
		if r := adminDo(t, c, p, http.MethodPut, "/rules", "", auth, "abort: {percent: 100}"); r.status != http.StatusUnauthorized {
			t.Errorf("PUT /rules with Authorization %q: %d, want 401", auth, r.status)
		}
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("an unauthorized PUT changed the rules: %+v", r)
	}
	if r := adminDo(t, c, p, http.MethodGet, "/healthz", "", "", ""); r.status != 200 {
		t.Errorf("GET /healthz without a token: %+v", r)
	}
	for _, auth := range []string{"Bearer s3cret-token", "bearer  s3cret-token "} {
		if r := adminDo(t, c, p, http.MethodPut, "/rules", "", auth, "abort: {percent: 100}"); r.status != 200 {
			t.Fatalf("PUT /rules with Authorization %q: %+v", auth, r)
		}
	}
	if rules := getRules(t, c, p, "Bearer s3cret-token"); rules.Abort.Percent != 100 {
		t.Fatalf("rules %+v", rules)
	}
	// The Host check applies with a token too.
	if r := adminDo(t, c, p, http.MethodGet, "/rules", "evil.example", "Bearer s3cret-token", ""); r.status != http.StatusForbidden {
		t.Errorf("foreign Host with the token: %d, want 403", r.status)
	}
}

// -allow-non-loopback covers the proxy listener only; the admin listener
// has its own flag, which needs a token; the token comes from
// -admin-token-file or $STORMGUARD_ADMIN_TOKEN (#26 item 9).
func TestAdminListenerFlagsAndToken(t *testing.T) {
	t.Setenv(envAdminToken, "")
	tokenFile := writeFile(t, "token", "file-token\n")
	up := []string{"-upstream", "http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		env  string
		want string // an error mentioning it, or "" for success
	}{
		{args: []string{"-admin", "0.0.0.0:0", "-allow-non-loopback"}, want: "-allow-non-loopback-admin"},
		{args: []string{"-listen", "0.0.0.0:0", "-allow-non-loopback-admin", "-admin-token-file", tokenFile}, want: "-allow-non-loopback"},
		{args: []string{"-admin", "0.0.0.0:0", "-allow-non-loopback-admin"}, want: "requires a token"},
		{args: []string{"-admin", "0.0.0.0:0", "-allow-non-loopback-admin", "-admin-token-file", tokenFile}},
		{args: []string{"-admin", "0.0.0.0:0", "-allow-non-loopback-admin"}, env: "env-token"},
		{args: []string{"-admin-token-file", writeFile(t, "empty", " \n")}, want: "is empty"},
		{args: []string{"-admin-token-file", writeFile(t, "two", "a\nb\n")}, want: "more than one line"},
		{args: []string{"-admin-token-file", "/nonexistent/token"}, want: "no such file"},
		{args: []string{"-config", writeFile(t, "c.yaml", "admin: 0.0.0.0:0\nallow_non_loopback_admin: true\nadmin_token_file: "+tokenFile+"\n")}},
	} {
		t.Setenv(envAdminToken, tc.env)
		_, err := parseArgs(append(append([]string{}, up...), tc.args...), io.Discard)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("parseArgs(%q) with $%s=%q: %v, want %q", tc.args, envAdminToken, tc.env, err, tc.want)
		}
	}
	t.Setenv(envAdminToken, " env-token\n")
	if c, err := parseArgs(up, io.Discard); err != nil || c.AdminToken != "env-token" {
		t.Fatalf("token from the environment: %q, %v", c.AdminToken, err)
	}
	if c, err := parseArgs(append(up, "-admin-token-file", tokenFile), io.Discard); err != nil || c.AdminToken != "file-token" {
		t.Fatalf("-admin-token-file wins over the environment: %q, %v", c.AdminToken, err)
	}
	var help strings.Builder
	if _, err := parseArgs([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, s := range []string{"-allow-non-loopback-admin", "-admin-token-file", envAdminToken, "Authorization: Bearer", "DNS rebinding"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("-h does not mention %q:\n%s", s, help.String())
		}
	}
}

// Through the proxy, a hung POST whose client leaves frees its slot: the
// next request is not rejected, nor queued behind it (#26 item 6).
func TestProxyHungPostFreesItsSlotWhenTheClientLeaves(t *testing.T) {
	up := newUpstream(t)
	ev := newEvents()
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), onEvent: ev.record,
		Rules: faultinject.Rules{HangPercent: 100, Limit: faultinject.Limit{Concurrency: 1}}}, nil)
	c := client(t)
	ctx, cancel := context.WithCancel(context.Background())
	hung := make(chan result, 1)
	go func() {
		hung <- send(ctx, c, http.MethodPost, p.proxyURL+"/upload", "text/plain", "a body nobody reads")
	}()
	ev.waitFor(t, faultinject.Hang)
	cancel()
	if r := recv(t, hung); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("hung POST: %+v", r)
	}
	// No hang any more, and room for one waiter: if the hung POST still
	// held the slot, the GET would wait behind it until the watchdog.
	if r := putRules(t, c, p, "", "limit: {concurrency: 1, queue: 1}"); r.status != 200 {
		t.Fatalf("PUT: %+v", r)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), testTimeout)
	defer gcancel()
	if r := send(gctx, c, http.MethodGet, p.proxyURL+"/next", "", ""); r.err != nil || r.status != 200 {
		t.Fatalf("next GET: %+v, want 200", r)
	}
	if got := counters(t, c, p); got.Hanging != 0 || got.InFlight != 0 || got.Rejected != 0 {
		t.Fatalf("counters %+v", got)
	}
}

// A PUT /rules whose body is a JSON null (a script serialising an unset
// variable) is refused with 400 and the faults stay, as an empty body is
// (issue 32 item 15).
func TestPutNullRulesIsRefused(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	c := client(t)
	if r := putRules(t, c, p, "", "abort: {percent: 100, status: 429}"); r.status != 200 {
		t.Fatalf("PUT abort: %+v", r)
	}
	for _, tc := range []struct{ contentType, body string }{
		{"application/json", "null"},
		{"application/json", " null\r\n"},
		{"application/json; charset=utf-8", "null"},
		{"application/merge-patch+json", "null"},
		{"application/yaml", "null"},
		{"application/yaml", "~"},
		{"", "null"},
	} {
		r := putRules(t, c, p, tc.contentType, tc.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "empty rules") {
			t.Errorf("PUT %q (%s): %+v, want 400 empty rules", tc.body, tc.contentType, r)
		}
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 429 {
		t.Fatalf("after the refused PUTs: %+v, want the abort rule still in force", r)
	}
	if r := putRules(t, c, p, "application/json", "{}"); r.status != 200 {
		t.Fatalf("PUT {} as JSON: %+v", r)
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("after PUT {}: %+v", r)
	}
}
