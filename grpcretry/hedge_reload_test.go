package grpcretry

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestHedgeFollowsReloadedHedgeBlock is the regression test of issue 32
// item 3: UnaryHedgingInterceptor, given a config.Handle's Hedger, asks the
// handle for its Hedger once per call, as the retry interceptors ask for
// the Policy: a reload that changes hedge.delay reaches the next call, one
// that removes hedge stops hedging (no hedge timer, one attempt, announced
// as the first), and one that adds it back hedges again.
func TestHedgeFollowsReloadedHedgeBlock(t *testing.T) {
	f := clocktest.NewFake()
	srv := newMetaServer()
	addr := serveWith(t, nil, srv)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(hedgeBlock string) {
		t.Helper()
		data := "policies:\n  inventory:\n    max_attempts: 3\n    backoff: {strategy: constant, base: 1ms}\n" + hedgeBlock +
			"operations:\n  grpc-inventory: inventory\n"
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := config.NewRegistry(config.Options{Clock: f})
	reload := func(hedgeBlock string) {
		t.Helper()
		write(hedgeBlock)
		if err := reg.Reload(path); err != nil {
			t.Fatal(err)
		}
	}
	reload("    hedge: {delay: 50ms, max_hedges: 1}\n")
	h := reg.Policy("grpc-inventory")
	client := dial(t, addr, grpc.WithChainUnaryInterceptor(
		UnaryHedgingInterceptor(h.Hedger(), WithIdempotentServices(testService))))

	// call starts a call and waits for its first copy on the server; it
	// returns the hedge timers then pending and a function that answers
	// (hedging at the delay first, when a timer is pending).
	call := func() (pending []time.Duration, finish func() (string, error)) {
		t.Helper()
		srv.reset(nil)
		out := make(chan callResult, 1)
		go func() {
			resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			out <- callResult{resp, err}
		}()
		srv.await(t, 1)
		pending = f.Deadlines()
		return pending, func() (string, error) {
			if len(pending) > 0 {
				f.Advance(pending[0])
				srv.await(t, 2)
				srv.open(2)
			} else {
				srv.open(1)
			}
			r := result(t, out)
			return r.resp.GetUsername(), r.err
		}
	}
	check := func(stage string, wantTimers []time.Duration, wantWinner string) {
		t.Helper()
		pending, finish := call()
		winner, err := finish()
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if !slices.Equal(pending, wantTimers) || winner != wantWinner {
			t.Errorf("%s: hedge timers %v, winner attempt %q; want %v, %q", stage, pending, winner, wantTimers, wantWinner)
		}
	}
	check("hedge 50ms", []time.Duration{50 * time.Millisecond}, "2")
	reload("    hedge: {delay: 80ms, max_hedges: 1}\n")
	check("reloaded to 80ms", []time.Duration{80 * time.Millisecond}, "2")
	reload("")
	check("hedge removed", nil, "1")
	reload("    hedge: {delay: 30ms, max_hedges: 1}\n")
	check("hedge back at 30ms", []time.Duration{30 * time.Millisecond}, "2")

	// Without a hedge block, a call that fails is still retried by the
	// policy (max_attempts 3), as UnaryClientInterceptor would.
	reload("")
	srv.reset(map[int]codes.Code{1: codes.Unavailable, 2: codes.Unavailable})
	srv.open(1, 2, 3)
	out := make(chan callResult, 1)
	go func() {
		resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		out <- callResult{resp, err}
	}()
	for n := 1; n <= 2; n++ {
		srv.await(t, n)
		f.BlockUntil(1) // the backoff before the retry (constant 1ms: a timer every time)
		f.Advance(time.Millisecond)
	}
	srv.await(t, 3)
	if r := result(t, out); r.err != nil || r.resp.GetUsername() != "3" {
		t.Fatalf("retried call without hedge: %v, %v (%v); want attempt 3's answer", r.resp.GetUsername(), r.err, status.Code(r.err))
	}
}

// TestHedgeNoHedgesRunsAsRetries: a Hedger with MaxHedges hedge.NoHedges
// (what a policy without hedge gives) makes the call as
// UnaryClientInterceptor would: attempts announced 1 and 2 (not 0), and
// a retryable code retried.
func TestHedgeNoHedgesRunsAsRetries(t *testing.T) {
	srv := newServer(outcome{code: codes.Unavailable})
	p := &retry.Policy{MaxAttempts: 2, Backoff: noWait}
	client := hedgeClient(t, srv, &hedge.Hedger{Policy: p, MaxHedges: hedge.NoHedges})
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, want := srv.announced(), []string{"1/1/-", "2/0/1"}; !slices.Equal(got, want) {
		t.Fatalf("announced %q, want %q", got, want)
	}
}
