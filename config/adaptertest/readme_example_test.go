package adaptertest_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the root README's "Metrics" and "Policies from a file"
// snippets, compiled and run so that they cannot drift
// (TestREADMESnippetsAreCompiled).
func Example_readme() {
	dir, _ := os.MkdirTemp("", "readme")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "policies.yaml")
	_ = os.WriteFile(path, []byte(`
policies:
  payments:
    max_attempts: 4
    budget: {kind: ratio, preset: ten_percent}
operations:
  charge-card: payments
`), 0o644)
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	prometheus.DefaultRegisterer = prometheus.NewRegistry() // the example runs with others
	policy := &retry.Policy{Operation: "get-user", Budget: budget.NewRatio(budget.TenPercent()), Breaker: breaker.New(breaker.Config{})}

	metrics := promretry.New(promretry.Config{})
	prometheus.MustRegister(metrics)
	policy.Observer = metrics
	metrics.WatchBudget("get-user", policy.Budget) // any retry.Budget: a redisstore one too
	metrics.WatchBreaker("get-user", policy.Breaker)

	reg, err := config.Open(path, config.Options{Observer: metrics, Logger: slog.Default()})
	if err != nil { // a missing or bad file stops start-up: nothing is served from a zero Policy
		log.Fatal(err)
	}
	w, err := reg.Watch(path, config.WatchOptions{}) // then follow changes; a bad edit is logged, the old policies keep serving
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	h := reg.Policy("charge-card")       // keep the handle; httpretry.New and grpcretry take it as it is
	err = retry.Run(ctx, h.Policy(), op) // one atomic load per call

	fmt.Println(err, h.Policy().AttemptLimit())
	// Output: <nil> 4
}
