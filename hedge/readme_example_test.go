package hedge_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the README's snippet, compiled and run so that it
// cannot drift (TestREADMESnippetsAreCompiled).
func Example_readme() {
	ctx := context.Background()
	policy := &retry.Policy{MaxAttempts: 3}
	op := func(ctx context.Context) (string, error) { return "answer", nil }
	release := func(string) {}

	h := &hedge.Hedger{
		Policy:   policy,                                    // a *retry.Policy or a config.Handle (retry.PolicySource)
		Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{}), // p95 of the last 10s, floor 1ms
		// Delay: 50 * time.Millisecond, // fixed delay (and the delay until Adaptive has 20 samples)
		// MaxHedges: 1,                 // the default
	}
	v, err := hedge.Do(ctx, h, op, release) // release(v) closes what losers returned

	client := &http.Client{Transport: &hedge.Transport{Next: http.DefaultTransport, Hedger: h}}
	fmt.Println(v, err, client.Transport != nil)
	// Output: answer <nil> true
}
