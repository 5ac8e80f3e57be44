package promretry_test

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
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// Register one Collector, use it as every policy's Observer, and watch the
// shared budget. The scrape below shows the call that needed one retry.
func Example() {
	metrics := promretry.New(promretry.Config{})
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

// A Scheduler reports to the Collector, a queue.RefusedObserver: the task
// it refuses at MaxPending, which the caller keeps, is a refusal, not a
// dropped record.
func ExampleCollector_QueueRefused() {
	metrics := promretry.New(promretry.Config{})
	gate := make(chan struct{})
	s := queue.NewScheduler(queue.SchedulerConfig{
		Name:       "emails",
		Workers:    1,
		MaxPending: 1,
		Policy:     &retry.Policy{MaxAttempts: 1},
		Observer:   metrics,
	})
	send := func(context.Context) error { <-gate; return nil }
	fmt.Println("first accepted:", s.Submit(send, nil))
	fmt.Println("second accepted:", s.Submit(send, nil)) // the caller keeps it
	close(gate)
	_, _ = s.Close(context.Background())

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	families, _ := reg.Gather()
	for _, f := range families {
		switch f.GetName() {
		case "stormguard_queue_refused_total", "stormguard_queue_dropped_records_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// first accepted: true
	// second accepted: false
	// stormguard_queue_dropped_records_total 0
	// stormguard_queue_refused_total 1
}
