package redisstore_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/redisstore"
	"github.com/stormguard/stormguard/retry"
)

// A fleet-wide breaker per host whose listeners say which host's breaker
// moved, and which host's member lost Redis. (Not run: it needs a Redis.)
func ExampleKeyedBreakers_memberListeners() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	hosts, err := redisstore.NewKeyedBreakers(keyed.Config{MaxKeys: 500, Idle: 10 * time.Minute}, redisstore.BreakerConfig{
		Client:    rdb,
		Namespace: "webhooks",
		Name:      "hosts",
		Breaker:   breaker.Config{ConsecutiveFailures: 5, OpenTimeout: 30 * time.Second},
		OnMemberStateChange: func(m redisstore.Member, from, to breaker.State) {
			log.Printf("breaker of %v: %v -> %v", m, from, to) // m.Key is the host; "(overflow)" when the group was full
		},
		OnMemberDegraded: func(m redisstore.Member, degraded bool, err error) {
			log.Printf("breaker of %v: degraded=%v: %v", m, degraded, err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer hosts.Close()

	p := retry.Policy{MaxAttempts: 3, Breaker: hosts} // each call uses the member of its key
	ctx := keyed.WithKey(context.Background(), "https://hooks.example.com:443")
	_, err = retry.Do(ctx, &p, func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://hooks.example.com/event", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	})
	log.Println(err)
}
