package promretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// Watch a client-side throttler: the scrape shows its rejection
// probability and the attempts it shed, which are also the calls that
// ended with outcome "throttled".
func ExampleCollector_WatchLimiter() {
	metrics := promretry.New(promretry.Config{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	users := throttle.NewSRE(throttle.SREConfig{MinRequests: -1, Rand: backoff.NewSource(1)})
	defer metrics.WatchLimiter("users.get", users)()
	policy := &retry.Policy{Operation: "users.get", MaxAttempts: 1, Limiter: users, Observer: metrics}
	for range 10 { // the backend refuses every call
		_ = retry.Run(context.Background(), policy, func(context.Context) error {
			return retry.Overloaded(errors.New("users: busy"))
		})
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "stormguard_throttle_") || name == "stormguard_calls_total" {
			var b strings.Builder
			_, _ = expfmt.MetricFamilyToText(&b, mf)
			for _, line := range strings.Split(b.String(), "\n") {
				if line != "" && !strings.HasPrefix(line, "#") && !strings.HasSuffix(line, " 0") {
					fmt.Println(line)
				}
			}
		}
	}
	// Output:
	// stormguard_calls_total{operation="users.get",outcome="overloaded"} 5
	// stormguard_calls_total{operation="users.get",outcome="throttled"} 5
	// stormguard_throttle_local_rejections_total{operation="users.get"} 5
	// stormguard_throttle_rejection_probability{operation="users.get"} 0.9090909090909091
}
