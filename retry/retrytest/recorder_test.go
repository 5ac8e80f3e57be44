package retrytest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// One Recorder observing many concurrent calls keeps every event, and the
// slices it returns are copies.
func TestRecorderConcurrentCalls(t *testing.T) {
	rec := new(retrytest.Recorder)
	p := &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: rec}
	fail := errors.New("down")
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			retry.Run(context.Background(), p, func(context.Context) error { return fail })
		})
	}
	wg.Wait()
	if s, e, r, c := len(rec.Starts()), len(rec.Ends()), len(rec.Retries()), len(rec.Calls()); s != 100 || e != 100 || r != 50 || c != 50 {
		t.Fatalf("starts %d, ends %d, retries %d, calls %d; want 100, 100, 50, 50", s, e, r, c)
	}
	calls := rec.Calls()
	calls[0].Attempts = 99
	if rec.Calls()[0].Attempts != 2 {
		t.Fatal("Calls returned the Recorder's own slice")
	}
	rec.Reset()
	if rec.String() != "" || len(rec.Ends()) != 0 {
		t.Fatalf("after Reset: %q", rec)
	}
}
