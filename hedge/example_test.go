package hedge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// A straggler is hedged after 10ms; the hedge answers, and the straggler
// is cancelled. The hedge spent from the same budget as retries would.
func Example() {
	h := &hedge.Hedger{
		Policy: &retry.Policy{MaxAttempts: 3, Budget: budget.NewRatio(budget.TenPercent())},
		Delay:  10 * time.Millisecond, // or Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{}) for p95
	}
	var calls atomic.Int32
	v, err := hedge.Do(context.Background(), h, func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // a straggler: it answers only when cancelled
			return "", ctx.Err()
		}
		return "fast answer", nil
	}, nil)
	fmt.Println(v, err, calls.Load())
	// Output: fast answer <nil> 2
}

// Only requests that may be sent twice are hedged.
func ExampleHedgeable() {
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	post, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", strings.NewReader("order"))
	fmt.Println(hedge.Hedgeable(get), hedge.Hedgeable(post))
	post.Header.Set("Idempotency-Key", "order-42")
	fmt.Println(hedge.Hedgeable(post))
	// Output:
	// true false
	// true
}

// A client whose idempotent requests are hedged at the p95 of recent
// latencies.
func ExampleTransport() {
	client := &http.Client{Transport: &hedge.Transport{
		Next: http.DefaultTransport,
		Hedger: &hedge.Hedger{
			Policy:   &retry.Policy{MaxAttempts: 3, Budget: budget.NewRatio(budget.TenPercent())},
			Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{Floor: 5 * time.Millisecond}),
		},
	}}
	_ = client
}
