package hedge_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// TestSetupPanicLeavesAnotherResponseLive: a hedge.Transport response
// keeps its winning attempt's context live until its body is closed. A
// later call that takes the same pooled call (one P: one cell) and panics
// in its setup (an Observer's CallStart) must not cancel that context: the
// pooled call's inline slot is still the earlier call's. Before, the
// second call's panic cleanup cancelled it.
func TestSetupPanicLeavesAnotherResponseLive(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: one cell
	var attemptCtx context.Context
	tr := &hedge.Transport{
		Next: rtFunc(func(r *http.Request) (*http.Response, error) {
			attemptCtx = r.Context()
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("hello")), Request: r}, nil
		}),
		Hedger: &hedge.Hedger{Policy: &retry.Policy{}, Delay: time.Hour},
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := attemptCtx.Err(); err != nil {
		t.Fatalf("request 1's attempt context ended before its body was closed: %v", err)
	}

	// An unrelated call, whose Observer's CallStart panics.
	h2 := &hedge.Hedger{Policy: &retry.Policy{Observer: panicCallStart{}}, Delay: time.Hour}
	func() {
		defer func() { _ = recover() }()
		hedge.Do(context.Background(), h2, func(context.Context) (int, error) { return 1, nil }, nil)
	}()

	if err := attemptCtx.Err(); err != nil {
		t.Fatalf("request 1's response (body still open) had its context cancelled by another call's setup panic: %v", err)
	}
}
