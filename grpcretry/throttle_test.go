package grpcretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
	"google.golang.org/grpc/codes"
)

// SRE throttling behind the interceptor, against a real server that
// answers RESOURCE_EXHAUSTED: every answer is an overload (no accepts), so
// the client sheds a growing share of first attempts locally, and the
// server sees fewer than the calls made; a server that answers OK is
// accepted every time.
func TestSREThroughInterceptor(t *testing.T) {
	script := make([]outcome, 200)
	for i := range script {
		script[i] = outcome{code: codes.ResourceExhausted}
	}
	srv := newServer(script...)
	sre := throttle.NewSRE(throttle.SREConfig{Rand: rand.NewPCG(1, 2)})
	client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 1, Limiter: sre})
	throttled := 0
	for range 200 {
		err := callMethod(context.Background(), client, "unary")
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	st := sre.Stats()
	attempts, _, _, _ := srv.stats()
	if st.Accepts != 0 || st.Requests != 200 || throttled == 0 || int(st.Rejected) != throttled || attempts != 200-throttled {
		t.Fatalf("stats %+v, %d throttled, server saw %d: want no accepts, 200 requests, local rejections that never reached the server", st, throttled, attempts)
	}
	if st.Probability < 0.5 {
		t.Fatalf("rejection probability %.2f after 200 overloads, want above 0.5", st.Probability)
	}

	ok := newServer()
	sre2 := throttle.NewSRE(throttle.SREConfig{Rand: rand.NewPCG(1, 2)})
	client = dialRetry(t, serve(t, ok), &retry.Policy{MaxAttempts: 1, Limiter: sre2})
	for range 50 {
		if err := callMethod(context.Background(), client, "unary"); err != nil {
			t.Fatal(err)
		}
	}
	if st := sre2.Stats(); st.Accepts != 50 || st.Rejected != 0 {
		t.Fatalf("a healthy server: stats %+v, want 50 accepts and no rejections", st)
	}
}
