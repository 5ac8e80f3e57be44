package redisstore_test

import (
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/redisstore"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the README's snippet, compiled so that it cannot drift
// (TestREADMESnippetsAreCompiled). It is not run: it needs the address
// redis:6379.
func Example_readme() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})

	br, err := redisstore.NewBreaker(redisstore.BreakerConfig{
		Client: rdb, Name: "payments",
		Breaker: breaker.Config{ // the same config as breaker.New
			Window:      breaker.Window{Duration: 30 * time.Second, MinCalls: 50, FailureRatio: 0.5},
			OpenTimeout: 15 * time.Second,
		},
		Logger: slog.Default(), // one warning when Redis is lost, one message when it is back
	})
	if err != nil { // a bad config; an unreachable Redis is not an error
		log.Fatal(err)
	}
	defer br.Close()
	bu, err := redisstore.NewBudget(redisstore.BudgetConfig{
		Client: rdb, Name: "payments", Ratio: budget.TenPercent(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer bu.Close()

	p := retry.Policy{MaxAttempts: 4, Breaker: br, Budget: bu}
	_ = p
}
