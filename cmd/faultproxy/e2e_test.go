package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// testTimeout bounds every wait of a test on a channel; it is a watchdog,
// never slept on.
const testTimeout = 10 * time.Second

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

// syncBuffer is a bytes.Buffer safe for concurrent writes (logs).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// upstream is a loopback server that echoes what it received; requests to
// /slow block until released (or their client leaves).
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{entered: make(chan struct{}, 16), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if strings.HasSuffix(r.URL.Path, "/slow") {
			u.entered <- struct{}{}
			select {
			case <-u.release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprintf(w, "upstream %s xff=%s", r.URL.Path, r.Header.Get("X-Forwarded-For"))
	}))
	t.Cleanup(u.Close)
	return u
}

// events records the injector's events for a test to wait on.
type events struct{ ch chan faultinject.Event }

func newEvents() *events                      { return &events{ch: make(chan faultinject.Event, 256)} }
func (e *events) record(ev faultinject.Event) { e.ch <- ev }
func (e *events) waitFor(t *testing.T, a faultinject.Action) faultinject.Event {
	t.Helper()
	for {
		if ev := recv(t, e.ch); ev.Action == a {
			return ev
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// startProxy starts a faultproxy on loopback ports chosen by the kernel and
// shuts it down at the end of the test.
func startProxy(t *testing.T, cfg config, logs io.Writer) *proxy {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Admin == "" {
		cfg.Admin = "127.0.0.1:0"
	}
	if logs == nil {
		logs = io.Discard
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	p, err := start(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := p.shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return p
}

// client uses a fresh connection per request, so that resets are seen.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type result struct {
	status int
	header http.Header
	body   string
	err    error
}

func send(ctx context.Context, c *http.Client, method, url, contentType, body string) result {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b), err}
}

func get(c *http.Client, url string) result {
	return send(context.Background(), c, http.MethodGet, url, "", "")
}

func goGet(ctx context.Context, c *http.Client, url string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- send(ctx, c, http.MethodGet, url, "", "") }()
	return ch
}

func putRules(t *testing.T, c *http.Client, p *proxy, contentType, body string) result {
	t.Helper()
	return send(context.Background(), c, http.MethodPut, p.adminURL+"/rules", contentType, body)
}

func counters(t *testing.T, c *http.Client, p *proxy) countersResponse {
	t.Helper()
	r := get(c, p.adminURL+"/counters")
	var out countersResponse
	if r.err != nil || r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
		t.Fatalf("GET /counters: %+v", r)
	}
	return out
}

func TestProxyEndToEnd(t *testing.T) {
	up := newUpstream(t)
	ev := newEvents()
	logs := &syncBuffer{}
	p := startProxy(t, config{Upstream: mustURL(t, up.URL+"/base"), LogFaults: true, onEvent: ev.record}, logs)
	c := client(t)

	// Pass-through: path joined to the upstream's, X-Forwarded-For set.
	r := get(c, p.proxyURL+"/x")
	if r.err != nil || r.status != 200 || r.body != "upstream /base/x xff=127.0.0.1" {
		t.Fatalf("pass-through: %+v", r)
	}

	// Abort, set live with a YAML body.
	if r := putRules(t, c, p, "application/yaml", "abort: {percent: 100, status: 503, retry_after: 2s}\n"); r.status != 200 || !strings.Contains(r.body, `"percent": 100`) {
		t.Fatalf("PUT abort rules: %+v", r)
	}
	r = get(c, p.proxyURL+"/x")
	if r.status != 503 || r.header.Get("Retry-After") != "2" || r.header.Get(faultinject.HeaderFault) != "abort" {
		t.Fatalf("abort: %+v", r)
	}

	// Reset, set with a JSON body.
	if r := putRules(t, c, p, "application/json", `{"reset_percent": 100}`); r.status != 200 {
		t.Fatalf("PUT reset rules: %+v", r)
	}
	if r := get(c, p.proxyURL+"/x"); !errors.Is(r.err, syscall.ECONNRESET) {
		t.Fatalf("reset: %+v, want ECONNRESET", r)
	}

	// Hang until the client gives up.
	if r := putRules(t, c, p, "", "hang_percent: 100"); r.status != 200 {
		t.Fatalf("PUT hang rules: %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hung := goGet(ctx, c, p.proxyURL+"/x")
	ev.waitFor(t, faultinject.Hang)
	cancel()
	if r := recv(t, hung); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("hang: %+v", r)
	}
	// The proxy learns that its caller went only when it sees the
	// connection close; until then the hung request holds its slot, and
	// the limit of one below would refuse the next request. Wait for it.
	for guard := time.Now().Add(10 * time.Second); ; { // a hang guard, not a wait for the code under test
		if got := counters(t, c, p); got.Hanging == 0 && got.InFlight == 0 {
			break
		}
		if time.Now().After(guard) {
			t.Fatal("the hung request still holds its slot 10 s after its caller went")
		}
		time.Sleep(time.Millisecond)
	}

	// A concurrency limit of one, no queue: the second request is refused
	// while the first is held by the upstream.
	if r := putRules(t, c, p, "", "limit: {concurrency: 1, status: 429, retry_after: 1s}"); r.status != 200 {
		t.Fatalf("PUT limit rules: %+v", r)
	}
	slow := goGet(context.Background(), c, p.proxyURL+"/slow")
	recv(t, up.entered)
	if r := get(c, p.proxyURL+"/x"); r.status != 429 || r.header.Get(faultinject.HeaderFault) != "reject" {
		t.Fatalf("over the limit: %+v", r)
	}
	if got := counters(t, c, p); got.InFlight != 1 {
		t.Fatalf("in flight %d while one request is held", got.InFlight)
	}
	close(up.release)
	if r := recv(t, slow); r.status != 200 {
		t.Fatalf("held request: %+v", r)
	}

	// Invalid rules are refused and the old ones stay.
	r = putRules(t, c, p, "", "abort: {percent: 101}")
	if r.status != 400 || !strings.Contains(r.body, "abort percent") {
		t.Fatalf("PUT invalid rules: %+v", r)
	}
	r = get(c, p.adminURL+"/rules?format=yaml")
	if back, err := parseRulesYAML([]byte(r.body)); err != nil || back.Limit.Concurrency != 1 || back.Limit.Status != 429 {
		t.Fatalf("GET /rules?format=yaml after a refused PUT: %+v, %v", back, err)
	}

	// The upstream saw only the passed requests; the counters add up.
	got := counters(t, c, p)
	if got.Passed != 2 || got.Aborted != 1 || got.Resets != 1 || got.Hangs != 1 || got.Rejected != 1 ||
		got.Settled() != got.Requests || got.PeakInFlight < 1 || up.hits.Load() != 2 {
		t.Fatalf("counters %+v, upstream hits %d", got.Counters, up.hits.Load())
	}
	for _, want := range []string{"action=abort", "action=reset", "action=hang", "action=reject", "rules updated"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestProxyLatencyAndOutageOnFakeClock(t *testing.T) {
	up := newUpstream(t)
	clk := clocktest.NewFake()
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), clock: clk,
		Rules: faultinject.Rules{Latency: 200 * time.Millisecond}}, nil)
	c := client(t)

	res := goGet(context.Background(), c, p.proxyURL+"/a")
	clk.BlockUntil(1)
	if d := clk.Deadlines(); len(d) != 1 || d[0] != 200*time.Millisecond {
		t.Fatalf("pending waits %v, want [200ms]", d)
	}
	if up.hits.Load() != 0 {
		t.Fatal("the upstream was called before the latency passed")
	}
	clk.Advance(200 * time.Millisecond)
	if r := recv(t, res); r.status != 200 {
		t.Fatalf("delayed request: %+v", r)
	}

	clk.Advance(time.Hour)
	// A 10s outage starting now: restart=true moves the schedule's epoch.
	if r := send(context.Background(), c, http.MethodPut, p.adminURL+"/rules?restart=true", "", "outages: [{start: 0s, end: 10s, status: 502}]"); r.status != 200 {
		t.Fatalf("PUT outage: %+v", r)
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 502 || r.header.Get(faultinject.HeaderFault) != "outage" {
		t.Fatalf("in the outage: %+v", r)
	}
	if got := counters(t, c, p); !got.OutageActive || got.Elapsed != "0s" || got.Outage != 1 {
		t.Fatalf("counters in the outage: %+v", got)
	}
	clk.Advance(10 * time.Second)
	if r := get(c, p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("after the outage: %+v", r)
	}
	if got := counters(t, c, p); got.OutageActive || got.Elapsed != "10s" || got.DelayTotal != 200*time.Millisecond {
		t.Fatalf("counters after the outage: %+v", got)
	}
}

func TestAdminEndpoints(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	c := client(t)
	if r := get(c, p.adminURL+"/healthz"); r.status != 200 || r.body != "ok\n" {
		t.Errorf("healthz: %+v", r)
	}
	r := get(c, p.adminURL+"/rules")
	if rules, err := faultinject.ParseRules([]byte(r.body)); r.status != 200 || err != nil || !rules.IsZero() ||
		r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /rules: %+v (%v)", r, err)
	}
	if r := send(context.Background(), c, http.MethodGet, p.adminURL+"/rules", "", ""); r.status != 200 {
		t.Errorf("GET /rules: %+v", r)
	}
	req, _ := http.NewRequest(http.MethodGet, p.adminURL+"/rules", nil)
	req.Header.Set("Accept", "application/yaml")
	if resp, err := c.Do(req); err != nil || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Errorf("Accept: yaml: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodPost, "/rules", "", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/counters", "", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nothing", "", http.StatusNotFound},
		{http.MethodPut, "/rules?restart=maybe", "{}", http.StatusBadRequest},
		{http.MethodPut, "/rules", "lantency: 1s", http.StatusBadRequest},
		{http.MethodPut, "/rules", strings.Repeat("#", maxRulesBody+1), http.StatusRequestEntityTooLarge},
	} {
		if r := send(context.Background(), c, tc.method, p.adminURL+tc.path, "", tc.body); r.status != tc.status {
			t.Errorf("%s %s: status %d, want %d (%s)", tc.method, tc.path, r.status, tc.status, r.body)
		}
	}
}

func TestShutdownReleasesHangingRequests(t *testing.T) {
	up := newUpstream(t)
	ev := newEvents()
	p, err := start(config{Listen: "127.0.0.1:0", Admin: "off", Upstream: mustURL(t, up.URL), onEvent: ev.record,
		Rules: faultinject.Rules{HangPercent: 100}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p.adminURL != "" {
		t.Fatalf("admin is off but listening on %s", p.adminURL)
	}
	hung := goGet(context.Background(), client(t), p.proxyURL+"/x")
	ev.waitFor(t, faultinject.Hang)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := p.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, hung); r.status != 503 || r.header.Get(faultinject.HeaderFault) != "closed" {
		t.Fatalf("hanging request at shutdown: %+v", r)
	}
}

// lineWriter delivers the first line written to it.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	line chan string
	sent bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if l, err := bufio.NewReader(bytes.NewReader(w.buf.Bytes())).ReadString('\n'); err == nil {
			w.sent = true
			w.line <- strings.TrimSpace(l)
		}
	}
	return len(p), nil
}

func TestRunServesUntilCanceled(t *testing.T) {
	up := newUpstream(t)
	stdout := &lineWriter{line: make(chan string, 1)}
	stderr := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-upstream", up.URL, "-abort", "100", "-abort-status", "500"}, stdout, stderr)
	}()
	line := recv(t, stdout.line)
	var proxyURL, adminURL string
	if _, err := fmt.Sscanf(line, "proxy=%s admin=%s", &proxyURL, &adminURL); err != nil ||
		!strings.HasPrefix(proxyURL, "http://127.0.0.1:") || !strings.HasPrefix(adminURL, "http://127.0.0.1:") {
		t.Fatalf("stdout line %q (%v)", line, err)
	}
	c := client(t)
	if r := get(c, proxyURL+"/"); r.status != 500 {
		t.Fatalf("through the proxy: %+v", r)
	}
	cancel()
	if got := recv(t, code); got != 0 {
		t.Fatalf("run returned %d; stderr:\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), "faultproxy started") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestRunRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-upstream", "http://127.0.0.1:1", "-listen", "0.0.0.0:0"},
		{"-upstream", "http://127.0.0.1:1", "-admin", "[::]:0"},
		{"-listen", "127.0.0.1:0"},
	} {
		var stderr syncBuffer
		if code := run(context.Background(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "faultproxy:") {
			t.Errorf("run(%q) = %d, stderr %q", args, code, stderr.String())
		}
	}
	if code := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("-h exits %d", code)
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	addr := strings.TrimPrefix(p.proxyURL, "http://")
	_, err := start(config{Listen: "127.0.0.1:0", Admin: addr, Upstream: mustURL(t, up.URL)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "-admin") {
		t.Fatalf("start with a busy admin port: %v", err)
	}
}
