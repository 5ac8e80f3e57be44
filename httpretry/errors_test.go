package httpretry_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// hangUp makes the handler take the connection and drop it without a
// response: with reset true the close sends RST (the client sees
// ECONNRESET), otherwise FIN (the client sees EOF).
func hangUp(t testing.TB, w http.ResponseWriter, reset bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if reset {
		conn.(*net.TCPConn).SetLinger(0)
	}
	conn.Close()
}

func TestDroppedConnectionIsRetried(t *testing.T) {
	for _, reset := range []bool{true, false} {
		t.Run(fmt.Sprintf("reset=%v", reset), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
				if hit == 1 {
					hangUp(t, w, reset)
					return
				}
				io.WriteString(w, "ok")
			})
			log := &attemptLog{}
			p := noWait(3)
			p.Observer = log
			rt := httpretry.New(newBase(t), p)
			resp, err := rt.RoundTrip(get(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp); body != "ok" {
				t.Errorf("body %q", body)
			}
			errs := log.attemptErrs()
			if len(errs) != 2 || errs[0] == nil || errs[1] != nil {
				t.Fatalf("attempt errors %v, want a failure then a success", errs)
			}
			if reset && !errors.Is(errs[0], syscall.ECONNRESET) {
				t.Errorf("first attempt failed with %v, want ECONNRESET", errs[0])
			}
			if !reset && !errors.Is(errs[0], io.EOF) {
				t.Errorf("first attempt failed with %v, want EOF", errs[0])
			}
		})
	}
}

// A dropped connection is not retried for a request that may not be
// repeated: the server may have acted on it.
func TestDroppedConnectionNotRetriedForPOST(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) { hangUp(t, w, true) })
	rt := httpretry.New(newBase(t), noWait(3))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	_, err := rt.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	if srv.hits.Load() != 1 {
		t.Errorf("%d requests, want 1", srv.hits.Load())
	}
	var re *retry.Error
	if errors.As(err, &re) {
		t.Errorf("a single send reported as exhausted retries: %v", err)
	}
}

// A connection refused is retried (here the first attempt goes to a closed
// port).
func TestConnectionRefusedIsRetried(t *testing.T) {
	srv := newServer(t, statuses(200))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	base := newBase(t)
	calls := 0
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			r = r.Clone(r.Context())
			r.URL.Host = closed
		}
		return base.RoundTrip(r)
	})
	log := &attemptLog{}
	p := noWait(3)
	p.Observer = log
	resp, err := httpretry.New(next, p).RoundTrip(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if errs := log.attemptErrs(); len(errs) != 2 || !errors.Is(errs[0], syscall.ECONNREFUSED) {
		t.Errorf("attempt errors %v, want connection refused then success", errs)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The caller's deadline reaches the server: the attempt in flight is
// cancelled, the handler sees it, and RoundTrip returns the deadline error
// without retrying.
func TestCallerDeadlineCancelsTheAttempt(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-release: // the server would otherwise take forever
		}
	})
	defer close(release)
	rt := httpretry.New(newBase(t), &retry.Policy{MaxAttempts: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := rt.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never saw its request cancelled")
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// The caller giving up during a retry wait: see
// TestCancelDuringWaitReturnsContextError.

// Policy.AttemptTimeout cuts a slow attempt (the server sees the
// cancellation), which is retried; the returned response's body outlives
// the attempt's timer.
func TestAttemptTimeout(t *testing.T) {
	arrived := make(chan int, 3)
	sawCancel := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		arrived <- hit
		if hit == 1 {
			<-r.Context().Done()
			sawCancel <- struct{}{}
			return
		}
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		io.WriteString(w, "hello")
	})
	p, fc := fakePolicy(3)
	p.AttemptTimeout = time.Second
	log := &attemptLog{}
	p.Observer = log
	rt := httpretry.New(newBase(t), p)
	done := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(get(t, srv.URL))
		done <- result{resp: resp, err: err}
	}()
	<-arrived
	if d := fc.Deadlines(); len(d) != 1 || d[0] != time.Second {
		t.Fatalf("pending timers %v, want the 1s attempt timeout", d)
	}
	fc.Advance(time.Second)
	<-sawCancel
	fc.BlockUntil(1) // the backoff wait
	if d := fc.Deadlines(); len(d) != 1 || d[0] != 100*time.Millisecond {
		t.Fatalf("pending timers %v, want the 100ms backoff", d)
	}
	fc.Advance(100 * time.Millisecond)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if fc.Pending() != 0 {
		t.Errorf("%d timers left pending", fc.Pending())
	}
	fc.Advance(time.Hour) // long past the attempt timeout: the body must still read
	if body := readAll(t, r.resp); body != "hello" {
		t.Errorf("body %q", body)
	}
	errs := log.attemptErrs()
	if len(errs) != 2 || !errors.Is(errs[0], retry.ErrAttemptTimeout) || errs[1] != nil {
		t.Errorf("attempt errors %v, want an attempt timeout then success", errs)
	}
}

func TestRetryableError(t *testing.T) {
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused", opErr(syscall.ECONNREFUSED), true},
		{"reset", &url.Error{Op: "Get", URL: "http://x", Err: opErr(syscall.ECONNRESET)}, true},
		{"EOF", fmt.Errorf("net/http: wrapped: %w", io.EOF), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"attempt timeout", fmt.Errorf("%w: slow", retry.ErrAttemptTimeout), true},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, true},
		{"DNS temporary", &net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, true},
		{"DNS no such host", &net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{"canceled", fmt.Errorf("op: %w", context.Canceled), false},
		{"x509", x509.UnknownAuthorityError{}, false},
		{"unknown", errors.New("net/http: malformed HTTP response"), false},
	}
	for _, tc := range cases {
		if got := httpretry.RetryableError(tc.err); got != tc.want {
			t.Errorf("%s: RetryableError(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if got := httpretry.DefaultClassifier(nil, tc.err); got != tc.want {
			t.Errorf("%s: DefaultClassifier(nil, %v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if httpretry.DefaultClassifier(nil, nil) {
		t.Error("DefaultClassifier(nil, nil) = true")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A transport error the classifier rejects is not retried and is reported
// permanent to the policy.
func TestUnretryableErrorIsPermanent(t *testing.T) {
	boom := errors.New("tls: handshake failure")
	calls := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, boom })
	log := &attemptLog{}
	p := noWait(3)
	p.Observer = log
	_, err := httpretry.New(next, p).RoundTrip(get(t, "http://127.0.0.1:1/"))
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("err %v after %d calls, want boom after 1", err, calls)
	}
	if errs := log.attemptErrs(); len(errs) != 1 || !retry.IsPermanent(errs[0]) {
		t.Errorf("attempt errors %v, want one permanent", errs)
	}
}

// Exhausted attempts on transport errors report the sentinel and the last
// error.
func TestAttemptsExhaustedOnErrors(t *testing.T) {
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF })
	_, err := httpretry.New(next, noWait(3)).RoundTrip(get(t, "http://127.0.0.1:1/"))
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, retry.ErrAttemptsExhausted) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err %v, want *retry.Error after 3 attempts wrapping ErrAttemptsExhausted and the EOF", err)
	}
}
