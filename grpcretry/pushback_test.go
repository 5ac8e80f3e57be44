package grpcretry

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// pushbackPolicy waits an hour between attempts unless the server says
// otherwise, so that any wait other than the pushback shows.
func pushbackPolicy(f *clocktest.Fake, rec *recorder) *retry.Policy {
	p := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Constant{Interval: time.Hour},
		Clock:       f,
		Rand:        backoff.NewSource(7),
	}
	if rec != nil {
		p.Observer = rec
	}
	return p
}

// TestPushbackZeroRetriesAtOnce: "0" means retry now (gRFC A6), even for
// ResourceExhausted, which is retried only with pushback; the backoff (an
// hour on a clock nobody advances) is never waited for.
func TestPushbackZeroRetriesAtOnce(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			srv := newServer(outcome{code: code, pushback: []string{"0"}})
			f := clocktest.NewFake()
			rec := newRecorder()
			client := dialRetry(t, serve(t, srv), pushbackPolicy(f, rec))
			within(t, func() {
				if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
					t.Errorf("call failed: %v", err)
				}
			})
			if attempts, _, _, _ := srv.stats(); attempts != 2 {
				t.Fatalf("%d attempts, want 2", attempts)
			}
			if scheduled := rec.Retries(); len(scheduled) != 1 || scheduled[0].Delay != 0 {
				t.Fatalf("scheduled %+v, want one retry after 0", scheduled)
			}
			var ae *AttemptError
			if err := rec.Ends()[0].Err; !errors.As(err, &ae) || !ae.HasPushback || ae.Pushback != 0 {
				t.Fatalf("attempt error %#v", err)
			}
		})
	}
}

// TestPushbackDelay: 300 ms replaces the hour-long backoff, jittered up by
// at most a tenth.
func TestPushbackDelay(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"300"}})
	f := clocktest.NewFake()
	rec := newRecorder()
	client := dialRetry(t, serve(t, srv), pushbackPolicy(f, rec))
	err := driveWaits(t, f, func() error {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		return err
	}, func(_ int, d time.Duration) {
		if d < 300*time.Millisecond || d > 330*time.Millisecond {
			t.Errorf("wait %v, want 300ms..330ms", d)
		}
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if scheduled := rec.Retries(); len(scheduled) != 1 || !scheduled[0].Advised {
		t.Fatalf("scheduled %+v, want one advised retry", scheduled)
	}
}

// TestPushbackStops: a negative, malformed or repeated pushback means "do
// not retry", even for a retryable code. A negative integer is also the
// overload marker (issue 20): the call ends with ReasonOverloaded and its
// error wraps retry.ErrOverloaded, so no layer above retries it either.
func TestPushbackStops(t *testing.T) {
	for _, values := range [][]string{{"-1"}, {"-250"}, {"abc"}, {""}, {"1.5"}, {"10", "20"}, {"99999999999999999999"}, {"-1", "-1"}} {
		t.Run(strconv.Quote(values[0]), func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable, pushback: values})
			f := clocktest.NewFake()
			rec := newRecorder()
			client := dialRetry(t, serve(t, srv), pushbackPolicy(f, rec))
			var err error
			within(t, func() { _, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{}) })
			if attempts, _, _, _ := srv.stats(); attempts != 1 {
				t.Fatalf("%d attempts, want 1", attempts)
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v", err)
			}
			var ae *AttemptError
			if !errors.As(err, &ae) || !ae.HasPushback || ae.Pushback >= 0 {
				t.Fatalf("AttemptError %+v", ae)
			}
			marker := len(values) == 1 && strings.HasPrefix(values[0], "-")
			want := retry.ReasonPermanent
			if marker {
				want = retry.ReasonOverloaded
			}
			if c := rec.lastCall(t); c.Reason != want || ae.Overloaded != marker || errors.Is(err, retry.ErrOverloaded) != marker {
				t.Fatalf("reason %v, Overloaded %v, errors.Is(err, retry.ErrOverloaded) %v; want the marker: %v",
					c.Reason, ae.Overloaded, errors.Is(err, retry.ErrOverloaded), marker)
			}
		})
	}
}

func TestPushbackCapsAndLimits(t *testing.T) {
	t.Run("beyond MaxRetryAfter stops the call", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"60000"}})
		f := clocktest.NewFake()
		rec := newRecorder()
		p := pushbackPolicy(f, rec)
		p.MaxRetryAfter = 2 * time.Second
		client := dialRetry(t, serve(t, srv), p)
		var err error
		within(t, func() { _, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{}) })
		if !errors.Is(err, retry.ErrAdviceExceedsCap) || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v (code %v), want ErrAdviceExceedsCap with the attempt's Unavailable", err, status.Code(err))
		}
		if attempts, _, _, _ := srv.stats(); attempts != 1 {
			t.Fatalf("%d attempts, want 1: coming back at the cap is sooner than the server asked", attempts)
		}
		if c := rec.lastCall(t); c.Reason != retry.ReasonAdvice {
			t.Fatalf("reason %v, want ReasonAdvice", c.Reason)
		}
	})
	t.Run("ignored with a negative MaxRetryAfter", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"300"}})
		f := clocktest.NewFake()
		p := pushbackPolicy(f, newRecorder())
		p.MaxRetryAfter = -1
		p.Backoff = backoff.Constant{Interval: time.Second}
		client := dialRetry(t, serve(t, srv), p)
		err := driveWaits(t, f, func() error {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			return err
		}, func(_ int, d time.Duration) {
			if d != time.Second {
				t.Errorf("wait %v, want the backoff's 1s", d)
			}
		}, 1)
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("does not make a final code retryable", func(t *testing.T) {
		srv := newServer(outcome{code: codes.InvalidArgument, pushback: []string{"0"}})
		client := dialRetry(t, serve(t, srv), pushbackPolicy(clocktest.NewFake(), nil))
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("err = %v", err)
		}
		if attempts, _, _, _ := srv.stats(); attempts != 1 {
			t.Fatalf("%d attempts", attempts)
		}
	})
	t.Run("deadline cannot hold the wait", func(t *testing.T) {
		srv := newServer(outcome{code: codes.Unavailable, pushback: []string{"5000"}})
		f := clocktest.NewFake()
		client := dialRetry(t, serve(t, srv), pushbackPolicy(f, nil))
		ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(time.Second))
		defer cancel()
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v (code %v), want to stop at once with DeadlineExceeded", err, status.Code(err))
		}
		if attempts, _, _, _ := srv.stats(); attempts != 1 {
			t.Fatalf("%d attempts", attempts)
		}
	})
}

// TestPushbackRestartsBackoff: after a pushback the schedule starts again
// from its first step (gRFC A6).
func TestPushbackRestartsBackoff(t *testing.T) {
	b := &pushbackBackoff{base: backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Minute}}
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		if n == 3 {
			b.push() // the wait is then the server's, by retry.After
		}
		got = append(got, b.Delay(n, 0))
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 0, 100 * ms, 200 * ms, 400 * ms}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	b.push()
	b.clear()
	if d := b.Delay(7, 0); d != 800*ms {
		t.Fatalf("a cleared pushback still applied: %v", d)
	}
}

func TestParsePushback(t *testing.T) {
	cases := []struct {
		in   []string
		d    time.Duration
		ok   bool
		name string
	}{
		{nil, 0, false, "absent"},
		{[]string{"0"}, 0, true, "zero"},
		{[]string{"300"}, 300 * time.Millisecond, true, "300"},
		{[]string{"+7"}, 7 * time.Millisecond, true, "plus sign, as strconv and grpc-go read it"},
		{[]string{"-1"}, -1, true, "negative"},
		{[]string{"abc"}, -1, true, "malformed"},
		{[]string{" 5"}, -1, true, "space"},
		{[]string{"1", "2"}, -1, true, "repeated"},
		{[]string{strconv.FormatInt(math.MaxInt64, 10)}, time.Duration(math.MaxInt64), true, "clamped"},
	}
	for _, c := range cases {
		d, ok := ParsePushback(c.in)
		if d != c.d || ok != c.ok {
			t.Errorf("%s: ParsePushback(%q) = %v, %v; want %v, %v", c.name, c.in, d, ok, c.d, c.ok)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		md := PushbackTrailer(d)
		got, ok := ParsePushback(md[PushbackKey])
		want := d.Truncate(time.Millisecond)
		if d < 0 {
			want = -1
		}
		if !ok || got != want {
			t.Errorf("PushbackTrailer(%v) reads back as %v, %v", d, got, ok)
		}
	}
}

func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "300", "-1", "abc", "", "+5", "9223372036854775807", "99999999999999999999", "00012"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParsePushback([]string{s})
		if !ok {
			t.Fatal("one value must always be read")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil || n < 0:
			if d != -1 {
				t.Fatalf("%q: %v, want -1 (do not retry)", s, d)
			}
		case n > math.MaxInt64/int64(time.Millisecond):
			if d != time.Duration(math.MaxInt64) {
				t.Fatalf("%q: %v, want the clamp", s, d)
			}
		default:
			if d != time.Duration(n)*time.Millisecond || d < 0 {
				t.Fatalf("%q: %v", s, d)
			}
		}
		if d2, ok2 := ParsePushback([]string{s, s}); !ok2 || d2 != -1 {
			t.Fatalf("repeated %q: %v, %v", s, d2, ok2)
		}
	})
}
