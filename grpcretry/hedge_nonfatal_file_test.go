package grpcretry

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHedgeNonFatalCodesFromPolicyFile: a hedging interceptor built from a
// config.Handle's Hedger, with no WithNonFatalCodes, takes the non-fatal
// codes from the file in force at the time of the failure: the policy's
// retry_on.grpc_codes when the hedge block names none, and
// hedge.non_fatal_codes after a reload that sets it ([] makes every code
// fatal). Before, a file-driven gRPC hedge treated every code as fatal
// (issue #32 item 8).
func TestHedgeNonFatalCodesFromPolicyFile(t *testing.T) {
	f := clocktest.NewFake()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	reg := config.NewRegistry(config.Options{Clock: f})
	load := func(hedgeBlock string) {
		t.Helper()
		data := "policies:\n  inventory:\n    max_attempts: 3\n    backoff: {strategy: constant, base: 1ms}\n" +
			"    retry_on: {grpc_codes: [UNAVAILABLE]}\n    hedge: {delay: 10ms, max_hedges: 1" + hedgeBlock + "}\n" +
			"operations:\n  grpc-inventory: inventory\n"
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := reg.Reload(path); err != nil {
			t.Fatal(err)
		}
	}
	load("")
	h := reg.Policy("grpc-inventory")

	// The hedge fails with UNAVAILABLE, which retry_on lists: the first
	// copy goes on, answers and wins.
	gate := make(chan struct{})
	srv := newServer(outcome{wait: gate}, outcome{code: codes.Unavailable})
	client := hedgeClient(t, srv, h.Hedger())
	res := goCall(client, "first")
	started(t, srv)
	hedgeAt(t, f, srv, 10*time.Millisecond)
	close(gate)
	if r := result(t, res); r.err != nil || string(r.resp.GetPayload().GetBody()) != "first" {
		t.Fatalf("retry_on.grpc_codes: call %v, %q; want the first copy's answer", r.err, r.resp.GetPayload().GetBody())
	}

	// After a reload naming no non-fatal code, the same failure ends the
	// call with UNAVAILABLE and the first copy is cancelled.
	load(", non_fatal_codes: []")
	srv2 := newServer(outcome{block: true}, outcome{code: codes.Unavailable})
	client2 := hedgeClient(t, srv2, h.Hedger())
	res2 := goCall(client2, "x")
	started(t, srv2)
	hedgeAt(t, f, srv2, 10*time.Millisecond)
	if r := result(t, res2); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("non_fatal_codes []: call error %v, want UNAVAILABLE at once", r.err)
	}
	if n := canceled(t, srv2); n != 1 {
		t.Fatalf("attempt %d cancelled, want the first", n)
	}
}
