package httpretry_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// A request body that cannot be read is reported, closed, and nothing is
// sent.
func TestRequestBodyReadError(t *testing.T) {
	calls := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, errors.New("unreachable") })
	boom := errors.New("disk on fire")
	body := &countingBody{Reader: io.MultiReader(strings.NewReader("abc"), failingReader{boom})}
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1/", body)
	_, err := httpretry.New(next, noWait(3)).RoundTrip(req)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "httpretry: ") {
		t.Errorf("err %v, want an httpretry error wrapping the read error", err)
	}
	if calls != 0 || body.closes.Load() != 1 {
		t.Errorf("%d sends and %d closes, want 0 and 1", calls, body.closes.Load())
	}
}

// The copies carrying a buffered body get a GetBody that replays it, so
// that the transport below can resend on a dead keep-alive connection.
func TestBufferedBodyGetsGetBody(t *testing.T) {
	payload := "the payload"
	var replays []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		first, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.GetBody == nil {
			t.Fatal("no GetBody on the attempt's request")
		}
		b, _ := r.GetBody()
		again, _ := io.ReadAll(b)
		replays = append(replays, string(first)+"|"+string(again))
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1/", io.NopCloser(strings.NewReader(payload)))
	if _, err := httpretry.New(next, noWait(3)).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(replays) != 1 || replays[0] != payload+"|"+payload {
		t.Errorf("attempt saw %q", replays)
	}
	if req.GetBody != nil {
		t.Error("the caller's request was given a GetBody")
	}
}

// A failed response whose body breaks while being drained is still
// returned as it was read when no retry follows: the bytes, then the error.
func TestFailedResponseBodyErrorKept(t *testing.T) {
	broken := errors.New("connection lost mid-body")
	calls := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls++
		return &http.Response{
			StatusCode: 503,
			Header:     http.Header{},
			Body:       io.NopCloser(io.MultiReader(strings.NewReader("partial"), failingReader{broken})),
		}, nil
	})
	b := &refusingBudget{} // the retry is refused after the body was read
	p := noWait(3)
	p.Budget = b
	resp, err := httpretry.New(next, p).RoundTrip(get(t, "http://127.0.0.1/"))
	if err != nil {
		t.Fatal(err)
	}
	got, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "partial" || !errors.Is(rerr, broken) {
		t.Errorf("body %q, %v; want the partial body then the error", got, rerr)
	}
	if calls != 1 {
		t.Errorf("%d calls", calls)
	}
}

// An attempt whose time runs out just as its response headers arrive is
// treated as timed out (its body would be cut) and retried.
func TestAttemptTimeoutAsHeadersArrive(t *testing.T) {
	p, fc := fakePolicy(3)
	p.AttemptTimeout = time.Second
	p.Backoff = zeroBackoff{}
	log := &attemptLog{}
	p.Observer = log
	calls := 0
	closed := 0
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			fc.Advance(time.Second) // the attempt's timer fires now
			if r.Context().Err() == nil {
				t.Error("attempt context not cancelled by its timeout")
			}
		}
		return &http.Response{StatusCode: 200, Body: closeCounter{io.NopCloser(strings.NewReader("ok")), &closed}}, nil
	})
	resp, err := httpretry.New(next, p).RoundTrip(get(t, "http://127.0.0.1/"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "ok" || calls != 2 {
		t.Errorf("body %q after %d calls, want ok after 2", body, calls)
	}
	if closed != 2 {
		t.Errorf("%d response bodies closed, want 2 (the late one and the returned one)", closed)
	}
	if errs := log.attemptErrs(); len(errs) != 2 || !errors.Is(errs[0], retry.ErrAttemptTimeout) {
		t.Errorf("attempt errors %v", errs)
	}
	if fc.Pending() != 0 {
		t.Errorf("%d timers pending", fc.Pending())
	}
}

type closeCounter struct {
	io.ReadCloser
	n *int
}

func (c closeCounter) Close() error {
	*c.n++
	return c.ReadCloser.Close()
}

// A GetBody failure with an attempt timeout configured releases the
// attempt's timer.
func TestGetBodyFailureWithAttemptTimeout(t *testing.T) {
	p, fc := fakePolicy(3)
	p.Backoff = zeroBackoff{}
	p.AttemptTimeout = time.Minute
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return &http.Response{StatusCode: 502, Body: io.NopCloser(strings.NewReader("bad gateway"))}, nil
	})
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1/", bytes.NewReader([]byte("x")))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := httpretry.New(next, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 502 || readAll(t, resp) != "bad gateway" {
		t.Errorf("want the 502 intact")
	}
	if fc.Pending() != 0 {
		t.Errorf("%d timers pending", fc.Pending())
	}
}
