package httpretry_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// server is an httptest server on loopback that counts requests and new
// connections.
type server struct {
	*httptest.Server
	mode  mode
	hits  atomic.Int64
	conns atomic.Int64
}

// newServer starts a loopback server running h; the hit counter is
// incremented before h runs, and h receives the hit number (1 first).
func newServer(t testing.TB, h func(w http.ResponseWriter, r *http.Request, hit int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, int(s.hits.Add(1)))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// statuses answers the i-th request with codes[i] (the last code repeats),
// with body "<code> body".
func statuses(codes ...int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, hit int) {
		io.Copy(io.Discard, r.Body)
		code := codes[min(hit, len(codes))-1]
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code)+" body")
	}
}

// quietLog is a server error log that drops what the tests provoke on
// purpose (aborted handlers, dropped connections).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// newBase returns a fresh http.Transport whose idle connections are closed
// when the test ends, so that goleak sees no connection goroutines.
func newBase(t testing.TB) *http.Transport {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// fakePolicy returns a policy on a fake clock with a fixed 100ms backoff.
func fakePolicy(maxAttempts int) (*retry.Policy, *clocktest.Fake) {
	fc := clocktest.NewFake()
	return &retry.Policy{
		MaxAttempts: maxAttempts,
		Backoff:     backoff.Constant{Interval: 100 * time.Millisecond},
		Clock:       fc,
	}, fc
}

// noWait is a policy whose retries do not wait (a zero backoff), for tests
// that are about which requests are sent, not when.
func noWait(maxAttempts int) *retry.Policy {
	return &retry.Policy{
		MaxAttempts: maxAttempts,
		Backoff:     zeroBackoff{},
	}
}

// zeroBackoff retries at once.
type zeroBackoff struct{}

func (zeroBackoff) Delay(int, time.Duration) time.Duration { return 0 }

// result is what a RoundTrip returned and the waits it made on the fake
// clock.
type result struct {
	resp  *http.Response
	err   error
	waits []time.Duration
}

// drive runs fn in a goroutine and, each time the code under test waits on
// the fake clock, records the wait and advances the clock by it, until fn
// returns. It must only be used when every timer the code starts is a
// retry wait (no AttemptTimeout).
func drive(t testing.TB, fc *clocktest.Fake, fn func() (*http.Response, error)) result {
	t.Helper()
	var r result
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.resp, r.err = fn()
	}()
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("drive: more than 100 waits")
		}
		blocked := make(chan struct{})
		go func() {
			fc.BlockUntil(1)
			close(blocked)
		}()
		select {
		case <-blocked:
			d := fc.Deadlines()[0]
			r.waits = append(r.waits, d)
			fc.Advance(d)
		case <-done:
			// Release the watcher goroutine.
			tm := fc.NewTimer(time.Hour)
			<-blocked
			tm.Stop()
			return r
		}
	}
}

// readAll reads and closes a response body.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("closing response body: %v", err)
	}
	return string(b)
}

func get(t testing.TB, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// countingBody is a request body without GetBody that counts Close calls.
type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// stubBreaker is a retry.Breaker that is open or closed and records the
// errors of the attempts it admitted.
type stubBreaker struct {
	mu   sync.Mutex
	open bool
	errs []error
}

var errOpen = errors.New("stub breaker: open")

func (b *stubBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return nil, errOpen
	}
	return func(err error) {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}, nil
}

func (b *stubBreaker) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return errOpen
	}
	return nil
}

func (b *stubBreaker) results() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]error(nil), b.errs...)
}

// refusingBudget grants no retry and counts what it is told.
type refusingBudget struct {
	records, withdrawals atomic.Int32
}

func (b *refusingBudget) Record(bool, error) { b.records.Add(1) }
func (b *refusingBudget) Withdraw(error) bool {
	b.withdrawals.Add(1)
	return false
}

// attemptLog is an Observer recording each attempt's error.
type attemptLog struct {
	retry.NopObserver
	mu   sync.Mutex
	errs []error
}

func (o *attemptLog) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	o.mu.Lock()
	o.errs = append(o.errs, e.Err)
	o.mu.Unlock()
}

func (o *attemptLog) attemptErrs() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}
