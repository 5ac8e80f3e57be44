package grpcretry

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// callMethod makes one call of method ("unary" or "server stream") and
// returns its error.
func callMethod(ctx context.Context, client testpb.TestServiceClient, method string) error {
	return callKind(ctx, client, method == "unary")
}

// TestAnnounce (issue 20, client side): every attempt carries its number
// (stormguard-attempt), whether the client may retry it
// (stormguard-will-retry, from retry.Call.WillRetry: the attempt count and
// the layer rule — or a caller above that retries), and on retries
// grpc-previous-rpc-attempts; the caller's
// deadline arrives natively. WithAnnounce(false) keeps only the standard
// grpc-previous-rpc-attempts.
func TestAnnounce(t *testing.T) {
	unavailable := outcome{code: codes.Unavailable}
	cases := []struct {
		name    string
		policy  retry.Policy
		opts    []Option
		inbound *retry.Inbound // on the caller's context
		script  []outcome
		want    []string // attempt/will-retry/previous per attempt
	}{
		{"three attempts", retry.Policy{MaxAttempts: 3}, nil, nil,
			[]outcome{unavailable, unavailable}, []string{"1/1/-", "2/1/1", "3/0/2"}},
		{"last attempt fails", retry.Policy{MaxAttempts: 2}, nil, nil,
			[]outcome{unavailable, unavailable}, []string{"1/1/-", "2/0/1"}},
		{"one attempt allowed", retry.Policy{MaxAttempts: 1}, nil, nil,
			nil, []string{"1/0/-"}},
		{"unlimited", retry.Policy{MaxAttempts: retry.Unlimited}, nil, nil,
			[]outcome{unavailable}, []string{"1/1/-", "2/1/1"}},
		{"announcing off", retry.Policy{MaxAttempts: 3}, []Option{WithAnnounce(false)}, nil,
			[]outcome{unavailable, unavailable}, []string{"-/-/-", "-/-/1", "-/-/2"}},
		{"announcing off, then on", retry.Policy{MaxAttempts: 2}, []Option{WithAnnounce(false), WithAnnounce(true)}, nil,
			[]outcome{unavailable}, []string{"1/1/-", "2/0/1"}},
		// The caller above retries: one attempt here (the layer rule), which
		// still says that the call will be retried — above.
		{"inbound caller retries: one layer", retry.Policy{MaxAttempts: 3}, nil, &retry.Inbound{Attempt: 1, Retries: true},
			[]outcome{unavailable}, []string{"1/1/-"}},
		{"inbound caller retries, rule ignored", retry.Policy{MaxAttempts: 2, Nested: retry.NestedIgnore}, nil, &retry.Inbound{Attempt: 1, Retries: true},
			[]outcome{unavailable}, []string{"1/1/-", "2/1/1"}},
		{"inbound caller does not retry", retry.Policy{MaxAttempts: 2}, nil, &retry.Inbound{Attempt: 1, Retries: false},
			[]outcome{unavailable}, []string{"1/1/-", "2/0/1"}},
		// A caller on its last attempt has retried: it is the retrying
		// layer, so this tier does not retry, and says retries happen above.
		{"inbound caller's last attempt", retry.Policy{MaxAttempts: 2}, nil, &retry.Inbound{Attempt: 2, Retries: false},
			[]outcome{unavailable}, []string{"1/1/-"}},
	}
	// Attempts past the prebuilt metadata (announcedAttempts) announce the
	// same way.
	long := make([]outcome, 19)
	var longWant []string
	for i := range long {
		long[i] = unavailable
		longWant = append(longWant, strconv.Itoa(i+1)+"/1/"+prevOf(i+1))
	}
	longWant = append(longWant, "20/0/19")
	cases = append(cases, struct {
		name    string
		policy  retry.Policy
		opts    []Option
		inbound *retry.Inbound
		script  []outcome
		want    []string
	}{"twenty attempts", retry.Policy{MaxAttempts: 20}, nil, nil, long, longWant})
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			// With metadata of the caller's own (appended to) and without
			// (the attempt's metadata is prebuilt).
			for _, callerMD := range []bool{false, true} {
				name := method + "/" + c.name
				if callerMD {
					name += "/caller metadata"
				}
				t.Run(name, func(t *testing.T) {
					srv := newServer(c.script...)
					p := c.policy
					p.Backoff = noWait
					client := dialRetry(t, serve(t, srv), &p, c.opts...)
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					defer cancel()
					if c.inbound != nil {
						ctx = retry.WithInbound(ctx, *c.inbound)
					}
					if callerMD {
						ctx = metadata.AppendToOutgoingContext(ctx, "x-caller", "c")
					}
					_ = callMethod(ctx, client, method)
					if got := srv.announced(); !slices.Equal(got, c.want) {
						t.Fatalf("announced %q, want %q", got, c.want)
					}
					_, _, left, _ := srv.stats()
					for i, l := range left {
						if l <= 59*time.Minute || l > time.Hour {
							t.Fatalf("attempt %d: %v left to the deadline at the server, want about an hour", i+1, l)
						}
					}
					srv.mu.Lock()
					defer srv.mu.Unlock()
					for i, md := range srv.incoming {
						want := []string(nil)
						if callerMD {
							want = []string{"c"}
						}
						if got := md.Get("x-caller"); !slices.Equal(got, want) {
							t.Fatalf("attempt %d: the caller's metadata arrived as %q, want %q", i+1, got, want)
						}
					}
				})
			}
		}
	}
}

func prevOf(n int) string {
	if n == 1 {
		return "-"
	}
	return strconv.Itoa(n - 1)
}

// TestAnnounceFindsTheOutgoingMetadataKey: announce learns package
// metadata's context key at init; if it did not, every attempt would take
// the slower AppendToOutgoingContext path, and this test says so.
func TestAnnounceFindsTheOutgoingMetadataKey(t *testing.T) {
	if outgoingKey == nil {
		t.Fatal("metadata.ValueFromOutgoingContext asked the context for no key")
	}
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("k", "v"))
	if ctx.Value(outgoingKey) == nil || context.Background().Value(outgoingKey) != nil {
		t.Fatal("the learnt key does not find outgoing metadata")
	}
	ic := &interceptor{}
	a := ic.announce(context.Background(), 2, true)
	if got := metadata.ValueFromOutgoingContext(a, AttemptKey); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("prebuilt attempt metadata %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { ic.announce(context.Background(), 3, false) }); n > 1 {
		t.Errorf("announce costs %v allocations with no caller metadata, want 1", n)
	}
}

// TestOverloadedNeverRetried (issue 20): a pushback of -1 is the overload
// marker: the interceptor does not retry it, the call's error wraps
// retry.ErrOverloaded, and a retry.Do around the call (another layer of
// the same client) does not retry it either.
func TestOverloadedNeverRetried(t *testing.T) {
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			overloaded := outcome{code: codes.Unavailable, pushback: []string{"-1"}}
			srv := newServer(overloaded, overloaded, overloaded, overloaded)
			rec := newRecorder()
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec})
			outer := newRecorder()
			err := retry.Run(context.Background(), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: outer}, func(ctx context.Context) error {
				return callMethod(ctx, client, method)
			})
			if attempts, _, _, _ := srv.stats(); attempts != 1 {
				t.Fatalf("the server saw %d attempts, want 1", attempts)
			}
			if !errors.Is(err, retry.ErrOverloaded) || status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v, want retry.ErrOverloaded and Unavailable", err)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonOverloaded {
				t.Fatalf("interceptor's reason %v, want overloaded", c.Reason)
			}
			if c := outer.lastCall(t); c.Reason != retry.ReasonOverloaded || c.Attempts != 1 {
				t.Fatalf("outer retry.Run: %+v, want one attempt, reason overloaded", c)
			}
		})
	}
}
