package prometheus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	sgprom "github.com/stormguard/stormguard/prometheus"
	"github.com/stormguard/stormguard/retry"
)

// Register one Collector, use it as every policy's Observer, and watch the
// shared budget. The scrape below shows the call that needed one retry.
func Example() {
	metrics := sgprom.New(sgprom.Config{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	bud := budget.NewRatio(budget.TenPercent())
	metrics.WatchBudget("inventory.get", bud)
	policy := &retry.Policy{
		Operation:   "inventory.get",
		MaxAttempts: 3,
		Backoff:     backoff.Constant{}, // no wait, for the example
		Budget:      bud,
		Observer:    metrics,
	}

	failures := 1
	_, err := retry.Do(context.Background(), policy, func(context.Context) (string, error) {
		if failures > 0 {
			failures--
			return "", errors.New("connection reset")
		}
		return "ok", nil
	})
	fmt.Println("call error:", err)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	for _, line := range strings.Split(body.String(), "\n") {
		if (strings.HasPrefix(line, "stormguard_attempts_total") || strings.HasPrefix(line, "stormguard_calls_total") ||
			strings.HasPrefix(line, "stormguard_retry_budget_tokens")) && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// call error: <nil>
	// stormguard_attempts_total{attempt_kind="first",operation="inventory.get",outcome="error"} 1
	// stormguard_attempts_total{attempt_kind="retry",operation="inventory.get",outcome="success"} 1
	// stormguard_calls_total{operation="inventory.get",outcome="success"} 1
	// stormguard_retry_budget_tokens{operation="inventory.get"} 9
}
