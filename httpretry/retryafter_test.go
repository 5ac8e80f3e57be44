package httpretry_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d time.Duration) time.Time { return now.Add(d) }
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{"  120\t", 120 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"86400", 24 * time.Hour, true},
		{"9223372036", 9223372036 * time.Second, true}, // the largest a Duration holds in seconds
		{"9223372037", math.MaxInt64, true},            // beyond: clamped, not ignored
		{"99999999999", math.MaxInt64, true},
		{"1000000000000", math.MaxInt64, true},
		{"99999999999999999999999999999", math.MaxInt64, true},
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"5 s", 0, false},
		{"soon", 0, false},
		{"0x10", 0, false},
		{in(3 * time.Second).Format(http.TimeFormat), 3 * time.Second, true}, // IMF-fixdate
		{in(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},   // obsolete RFC 850
		{in(time.Hour).Format(time.ANSIC), time.Hour, true},                  // asctime
		{in(-time.Hour).Format(http.TimeFormat), 0, true},                    // in the past: now
		{"Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64, true},               // beyond a Duration: clamped
		{"Wed, 21 Oct 2015 07:28:00", 0, false},                              // no zone
		{"Wed, 32 Oct 2030 07:28:00 GMT", 0, false},                          // no such day
	}
	for _, tc := range cases {
		got, ok := httpretry.ParseRetryAfter(tc.value, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range []string{"0", "2", " 120 ", "99999999999", "9223372036", "-1", "1.5", "",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015",
		"Tue, 01 Jan 2030 00:00:05 GMT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := httpretry.ParseRetryAfter(s, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: a rejected value must give 0", s, d)
		}
		// A decimal integer is always accepted: that many seconds when a
		// Duration holds them, else the largest Duration (clamped).
		trimmed := strings.Trim(s, " \t")
		if trimmed != "" && strings.Trim(trimmed, "0123456789") == "" {
			n, err := strconv.ParseInt(trimmed, 10, 64)
			fits := err == nil && n <= int64(1<<63-1)/int64(time.Second)
			want := time.Duration(math.MaxInt64)
			if fits {
				want = time.Duration(n) * time.Second
			}
			if !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", s, d, ok, want)
			}
		}
		// A date is judged against now: moving now forward never lengthens
		// the wait.
		if ok {
			if d2, ok2 := httpretry.ParseRetryAfter(s, now.Add(time.Second)); !ok2 || d2 > d {
				t.Fatalf("ParseRetryAfter(%q) later = %v, %v; earlier %v", s, d2, ok2, d)
			}
		}
	})
}

// retryAfterServer answers 429 (or code) with the Retry-After value v
// computed from the fake clock, then 200.
func retryAfterServer(t *testing.T, code int, v func() string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		if hit == 1 {
			w.Header().Set("Retry-After", v())
			w.WriteHeader(code)
			io.WriteString(w, "slow down")
			return
		}
		io.WriteString(w, "ok")
	})
}

func TestRetryAfterSetsTheWait(t *testing.T) {
	const backoff = 100 * time.Millisecond // fakePolicy's computed wait
	cases := []struct {
		name     string
		code     int
		value    func(fc *clocktest.Fake) string
		min, max time.Duration
		maxAfter time.Duration // Policy.MaxRetryAfter
	}{
		{"seconds", 429, func(*clocktest.Fake) string { return "2" }, 2 * time.Second, 2200 * time.Millisecond, 0},
		{"seconds on 503", 503, func(*clocktest.Fake) string { return "3" }, 3 * time.Second, 3300 * time.Millisecond, 0},
		{"IMF-fixdate", 429, func(fc *clocktest.Fake) string {
			return fc.Now().Add(5 * time.Second).Format(http.TimeFormat)
		}, 5 * time.Second, 5500 * time.Millisecond, 0},
		{"RFC 850 date", 429, func(fc *clocktest.Fake) string {
			return fc.Now().Add(4 * time.Second).Format(time.RFC850)
		}, 4 * time.Second, 4400 * time.Millisecond, 0},
		{"asctime date", 503, func(fc *clocktest.Fake) string {
			return fc.Now().Add(6 * time.Second).UTC().Format(time.ANSIC)
		}, 6 * time.Second, 6600 * time.Millisecond, 0},
		// Advice beyond MaxRetryAfter stops the call: see
		// TestRetryAfterBeyondCapReturnsResponse.
		{"at a custom MaxRetryAfter", 429, func(*clocktest.Fake) string { return "10" }, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"jitter stays below the cap", 429, func(*clocktest.Fake) string { return "29" }, 29 * time.Second, 30 * time.Second, 0},
		// A value beyond a Duration is clamped, and so stops the call:
		// see TestRetryAfterBeyondCapReturnsResponse.
		{"garbage", 429, func(*clocktest.Fake) string { return "in a while" }, backoff, backoff, 0},
		{"negative", 429, func(*clocktest.Fake) string { return "-5" }, backoff, backoff, 0},
		{"past date", 429, func(fc *clocktest.Fake) string {
			return fc.Now().Add(-time.Minute).Format(http.TimeFormat)
		}, backoff, backoff, 0},
		{"shorter than the backoff", 429, func(*clocktest.Fake) string { return "0" }, backoff, backoff, 0},
		{"ignored on 502", 502, func(*clocktest.Fake) string { return "7" }, backoff, backoff, 0},
		{"ignored when MaxRetryAfter < 0", 429, func(*clocktest.Fake) string { return "7" }, backoff, backoff, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := fakePolicy(3)
			p.MaxRetryAfter = tc.maxAfter
			srv := retryAfterServer(t, tc.code, func() string { return tc.value(fc) })
			rt := httpretry.New(newBase(t), p)
			r := drive(t, fc, func() (*http.Response, error) { return rt.RoundTrip(get(t, srv.URL)) })
			if r.err != nil {
				t.Fatal(r.err)
			}
			if body := readAll(t, r.resp); r.resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("got %d %q, want 200 ok", r.resp.StatusCode, body)
			}
			if len(r.waits) != 1 {
				t.Fatalf("waits %v, want one", r.waits)
			}
			if w := r.waits[0]; w < tc.min || w > tc.max {
				t.Errorf("waited %v, want within [%v, %v]", w, tc.min, tc.max)
			}
			limit := tc.maxAfter
			if limit <= 0 {
				limit = retry.DefaultMaxRetryAfter
			}
			if r.waits[0] > limit {
				t.Errorf("waited %v, above MaxRetryAfter %v", r.waits[0], limit)
			}
		})
	}
}

// A Retry-After that the caller's deadline cannot hold returns the response
// at once, body intact, instead of sleeping only to fail.
func TestRetryAfterBeyondDeadlineReturnsResponse(t *testing.T) {
	p, fc := fakePolicy(5)
	srv := retryAfterServer(t, 429, func() string { return "10" })
	rt := httpretry.New(newBase(t), p)
	ctx, cancel := context.WithDeadline(context.Background(), fc.Now().Add(5*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	r := drive(t, fc, func() (*http.Response, error) { return rt.RoundTrip(req) })
	if r.err != nil {
		t.Fatalf("err %v, want the 429 response", r.err)
	}
	if r.resp.StatusCode != 429 || r.resp.Header.Get("Retry-After") != "10" {
		t.Errorf("status %d", r.resp.StatusCode)
	}
	if body := readAll(t, r.resp); body != "slow down" {
		t.Errorf("body %q", body)
	}
	if len(r.waits) != 0 || srv.hits.Load() != 1 {
		t.Errorf("waits %v, hits %d: want no wait and one request", r.waits, srv.hits.Load())
	}
}
