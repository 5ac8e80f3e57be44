package httpretry_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// Issue #18 item 1: an attempt cut by AttemptTimeout is retried over every
// protocol. Over HTTP/2 the transport returns the attempt context's Err,
// which was context.Canceled and so never retried.
func TestAttemptTimeoutRetriedOverEveryProtocol(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		arrived := make(chan int, 3)
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			arrived <- hit
			if hit == 1 {
				<-r.Context().Done() // until the attempt is cut
				return
			}
			io.WriteString(w, "ok")
		})
		p, fc := fakePolicy(3)
		p.AttemptTimeout = time.Second
		rec := new(retrytest.Recorder)
		p.Observer = rec
		rt := httpretry.New(srv.base(t), p)
		done := make(chan result, 1)
		go func() {
			resp, err := rt.RoundTrip(get(t, srv.URL))
			done <- result{resp: resp, err: err}
		}()
		<-arrived
		fc.Advance(time.Second) // the attempt's timeout
		waitOrDone(t, fc, done) // the backoff wait
		fc.Advance(100 * time.Millisecond)
		r := <-done
		if r.err != nil {
			t.Fatalf("RoundTrip: %v (attempts %s)", r.err, rec)
		}
		checkProto(t, m, r.resp)
		if body := readAll(t, r.resp); body != "ok" || srv.hits.Load() != 2 {
			t.Errorf("body %q after %d requests, want ok after 2", body, srv.hits.Load())
		}
		if got, want := rec.String(), "start#1 end#1:timeout retry#2 start#2 end#2:success callend:success"; got != want {
			t.Errorf("events %s, want %s", got, want)
		}
	})
}

// waitOrDone waits until the code under test waits on fc, and fails the
// test if the RoundTrip running in the background ends instead.
func waitOrDone(t *testing.T, fc *clocktest.Fake, done chan result) {
	t.Helper()
	blocked := make(chan struct{})
	go func() {
		fc.BlockUntil(1)
		close(blocked)
	}()
	select {
	case <-blocked:
	case r := <-done:
		// Release the watcher goroutine.
		tm := fc.NewTimer(time.Hour)
		<-blocked
		tm.Stop()
		if r.resp != nil {
			readAll(t, r.resp)
		}
		t.Fatalf("RoundTrip ended without a retry: %v, %v", r.resp, r.err)
	}
}

// Issue #18 item 2: a protocol upgrade works through the transport, with
// or without AttemptTimeout: the 101 response's body is the connection, an
// io.ReadWriteCloser, as WebSocket clients require. (HTTP/2 has no 101.)
func TestProtocolUpgradeThroughTransport(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			if r.Header.Get("Upgrade") != "echo" {
				http.Error(w, "upgrade required", http.StatusUpgradeRequired)
				return
			}
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString("echo: " + line)
			brw.Flush()
		})
		for _, tc := range []struct {
			name    string
			timeout time.Duration
			obs     bool
		}{{"plain", 0, false}, {"observed", 0, true}, {"AttemptTimeout", 10 * time.Second, false}} {
			t.Run(tc.name, func(t *testing.T) {
				p := &retry.Policy{MaxAttempts: 3, AttemptTimeout: tc.timeout}
				if tc.obs {
					p.Observer = new(retrytest.Recorder)
				}
				client := &http.Client{Transport: httpretry.New(srv.base(t), p)}
				req := get(t, srv.URL)
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "echo")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("status %d, want 101", resp.StatusCode)
				}
				rwc, ok := resp.Body.(io.ReadWriteCloser)
				if !ok {
					t.Fatalf("101 body is a %T, not an io.ReadWriteCloser", resp.Body)
				}
				if _, err := io.WriteString(rwc, "ping\n"); err != nil {
					t.Fatalf("write on the upgraded connection: %v", err)
				}
				line, err := bufio.NewReader(rwc).ReadString('\n')
				if err != nil || line != "echo: ping\n" {
					t.Errorf("read %q, %v; want the echo", line, err)
				}
			})
		}
	}, http1Mode, https1Mode)
}

// Issue #18 item 3: errors behave as net/http's. Side by side with a plain
// http.Client on the same server: a deadline is a Timeout for a GET and
// for a POST sent once, net.Error sees it, errors.Is finds the sentinels,
// and the message does not repeat itself.
func TestErrorsBehaveAsNetHTTP(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		release := make(chan struct{})
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		plain := &http.Client{Transport: srv.base(t)}
		sg := &http.Client{Transport: httpretry.New(srv.base(t), &retry.Policy{MaxAttempts: 3})}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			do := func(c *http.Client) error {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, method, srv.URL, strings.NewReader("x"))
				resp, err := c.Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%s: no error", method)
				}
				return err
			}
			want, got := do(plain), do(sg)
			var wantURL, gotURL *url.Error
			if !errors.As(want, &wantURL) || !errors.As(got, &gotURL) {
				t.Fatalf("%s: not *url.Error: %v / %v", method, want, got)
			}
			if wantURL.Timeout() != gotURL.Timeout() || !gotURL.Timeout() {
				t.Errorf("%s: Timeout() %v, net/http says %v (%v)", method, gotURL.Timeout(), wantURL.Timeout(), got)
			}
			var wantNet, gotNet net.Error
			if errors.As(want, &wantNet) != errors.As(got, &gotNet) || gotNet == nil || gotNet.Timeout() != wantNet.Timeout() {
				t.Errorf("%s: as net.Error %v, net/http %v", method, gotNet, wantNet)
			}
			if !errors.Is(got, context.DeadlineExceeded) {
				t.Errorf("%s: %v does not match context.DeadlineExceeded", method, got)
			}
			if n := strings.Count(got.Error(), "context deadline exceeded"); n != 1 {
				t.Errorf("%s: message %q says it %d times", method, got, n)
			}
			var re *retry.Error
			if method == http.MethodGet && !errors.As(got, &re) {
				t.Errorf("GET: %v does not hold the *retry.Error", got)
			}
			if method == http.MethodPost && got.Error() != want.Error() {
				t.Errorf("POST sent once: %q, net/http says %q", got, want)
			}
		}
	})
}

// Issue #18 item 3, attempt timeouts: a call whose every attempt was cut
// ends with an error that is a Timeout and matches both the attempt
// timeout and the exhausted attempts.
func TestAttemptTimeoutsExhaustedIsTimeout(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		// The attempt timer runs on a fake clock, advanced once each
		// attempt has reached the server: no race with a real timer on a
		// loaded machine (a 20 ms real timeout could expire during the
		// TLS handshake, before any request arrived).
		release := make(chan struct{})
		arrived := make(chan struct{}, 2)
		srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		fc := clocktest.NewFake()
		p := noWait(2)
		p.Clock = fc
		p.AttemptTimeout = 20 * time.Millisecond
		client := &http.Client{Transport: httpretry.New(srv.base(t), p)}
		errc := make(chan error, 1)
		go func() {
			_, err := client.Get(srv.URL)
			errc <- err
		}()
		for range 2 {
			<-arrived
			fc.BlockUntil(1) // the attempt's timer
			fc.Advance(20 * time.Millisecond)
		}
		err := <-errc
		var ue *url.Error
		if !errors.As(err, &ue) || !ue.Timeout() {
			t.Errorf("err %v: want a *url.Error whose Timeout() is true", err)
		}
		if !errors.Is(err, retry.ErrAttemptTimeout) || !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Errorf("err %v: want ErrAttemptTimeout and ErrAttemptsExhausted", err)
		}
		if srv.hits.Load() != 2 {
			t.Errorf("%d requests, want 2", srv.hits.Load())
		}
	})
}

// Issue #18 item 4: the same server failure is judged the same over every
// protocol, following the idempotency rules: a GET is retried, a POST
// without a key is not (the server may have acted on it) — except when the
// request never reached the server (REFUSED_STREAM, a refused dial), which
// is retried for any request whose body can be replayed.
func TestServerFailuresJudgedAlikeOverEveryProtocol(t *testing.T) {
	type setup struct {
		rt   http.RoundTripper
		url  string
		hits func() int64
	}
	cases := []struct {
		name string
		// new returns a transport and URL whose first request fails, and
		// whose next ones succeed.
		new func(t *testing.T, m mode) setup
		// POST without a key retried?
		postRetried bool
	}{
		{
			// HTTP/1.1: the connection closes (EOF); HTTP/2: RST_STREAM
			// INTERNAL_ERROR.
			name: "handler aborted",
			new: func(t *testing.T, m mode) setup {
				srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
					io.Copy(io.Discard, r.Body)
					if hit == 1 {
						panic(http.ErrAbortHandler)
					}
					io.WriteString(w, "ok")
				})
				return setup{srv.base(t), srv.URL, srv.hits.Load}
			},
		},
		{
			// HTTP/1.1: the server closes the connection without answering;
			// HTTP/2: GOAWAY naming the stream as received, then the
			// connection closes.
			name: "connection closed",
			new: func(t *testing.T, m mode) setup {
				if m == http2Mode {
					srv := newRawH2(t, func(n int) h2Action {
						if n == 1 {
							return h2GoAwayClose
						}
						return h2OK
					})
					return setup{srv.base(t), srv.URL, srv.hits.Load}
				}
				srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
					io.Copy(io.Discard, r.Body)
					if hit == 1 {
						hangUp(t, w, false)
						return
					}
					io.WriteString(w, "ok")
				})
				return setup{srv.base(t), srv.URL, srv.hits.Load}
			},
		},
		{
			// HTTP/1.1: the dial is refused; HTTP/2: the stream is refused
			// (the genuine error net/http hands on once its own retries
			// give up, which takes a minute, so it is injected).
			name:        "refused",
			postRetried: true,
			new: func(t *testing.T, m mode) setup {
				srv := newModeServer(t, m, func(w http.ResponseWriter, r *http.Request, hit int) {
					io.Copy(io.Discard, r.Body)
					io.WriteString(w, "ok")
				})
				base := srv.base(t)
				var refused error
				if m == http2Mode {
					refused = h2StreamError(t, codeRefusedStream)
				}
				closed := closedAddr(t)
				var calls atomic.Int64
				next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if calls.Add(1) > 1 {
						return base.RoundTrip(r)
					}
					if refused != nil {
						if r.Body != nil {
							r.Body.Close()
						}
						return nil, refused
					}
					r = r.Clone(r.Context())
					r.URL.Host = closed
					return base.RoundTrip(r)
				})
				return setup{next, srv.URL, func() int64 { return calls.Load() }}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run(t, func(t *testing.T, m mode) {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					s := tc.new(t, m)
					rec := new(retrytest.Recorder)
					p := noWait(3)
					p.Observer = rec
					req, _ := http.NewRequest(method, s.url, strings.NewReader("payload"))
					resp, err := httpretry.New(s.rt, p).RoundTrip(req)
					retried := method == http.MethodGet || tc.postRetried
					if !retried {
						if err == nil {
							readAll(t, resp)
							t.Fatalf("%s: got %d, want the failure (%s)", method, resp.StatusCode, rec)
						}
						if n := s.hits(); n != 1 {
							t.Errorf("%s: sent %d times, want once", method, n)
						}
						continue
					}
					if err != nil {
						t.Fatalf("%s: %v (%s)", method, err, rec)
					}
					checkProto(t, m, resp)
					if body := readAll(t, resp); body != "ok" {
						t.Errorf("%s: body %q", method, body)
					}
					if n := s.hits(); n != 2 {
						t.Errorf("%s: sent %d times, want 2 (%s)", method, n, rec)
					}
				}
			})
		})
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Issue #18 item 4, the classifier on the genuine HTTP/2 errors net/http
// returns.
func TestRetryableErrorHTTP2(t *testing.T) {
	cases := []struct {
		code uint32
		want bool
	}{
		{codeRefusedStream, true},
		{codeInternal, true},
		{0x8, true},  // CANCEL
		{0x1, false}, // PROTOCOL_ERROR
		{0x3, false}, // FLOW_CONTROL_ERROR
		{0xd, false}, // HTTP_1_1_REQUIRED
	}
	for _, tc := range cases {
		err := h2StreamError(t, tc.code)
		if got := httpretry.RetryableError(err); got != tc.want {
			t.Errorf("RetryableError(%v) = %v, want %v", err, got, tc.want)
		}
		if got := httpretry.RetryableError(&url.Error{Op: "Get", URL: "https://x", Err: err}); got != tc.want {
			t.Errorf("RetryableError(wrapped %v) = %v, want %v", err, got, tc.want)
		}
	}
	// A real GOAWAY followed by the connection's close.
	srv := newRawH2(t, func(int) h2Action { return h2GoAwayClose })
	_, err := srv.base(t).RoundTrip(get(t, srv.URL))
	if err == nil || !httpretry.RetryableError(err) {
		t.Errorf("GOAWAY then close: RetryableError(%v) = false", err)
	}
}

// A POST whose body has no GetBody cannot be replayed: a refused stream
// does not make it sent twice.
func TestRefusedStreamWithoutReplayableBodySentOnce(t *testing.T) {
	refused := h2StreamError(t, codeRefusedStream)
	calls := 0
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		r.Body.Close()
		return nil, refused
	})
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", io.NopCloser(strings.NewReader("x")))
	_, err := httpretry.New(next, noWait(3)).RoundTrip(req)
	if err == nil || calls != 1 {
		t.Errorf("err %v after %d sends, want an error after 1", err, calls)
	}
}
