package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/redisstore"
	"github.com/stormguard/stormguard/retry"
)

// A retry policy whose breaker and budget are shared by every replica of
// the service. The example runs whether or not a Redis answers on
// 127.0.0.1:6379: without one, each process decides on local state.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // lets redisstore bound every call by its Timeout
	})
	defer rdb.Close()

	br, err := redisstore.NewBreaker(redisstore.BreakerConfig{
		Client:    rdb,
		Namespace: "stormguard-example",
		Name:      "payments",
		Breaker: breaker.Config{
			Window:      breaker.Window{Duration: 30 * time.Second, MinCalls: 20, FailureRatio: 0.5},
			OpenTimeout: 15 * time.Second,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer br.Close()

	bu, err := redisstore.NewBudget(redisstore.BudgetConfig{
		Client:    rdb,
		Namespace: "stormguard-example",
		Name:      "payments",
		Ratio:     budget.TenPercent(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer bu.Close()

	p := retry.Policy{MaxAttempts: 3, Breaker: br, Budget: bu}
	receipt, err := retry.Do(context.Background(), &p, func(context.Context) (string, error) {
		return "paid", nil
	})
	fmt.Println(receipt, err)
	// Output: paid <nil>
}

// Configuration errors wrap ErrInvalidConfig.
func ExampleBreakerConfig_Validate() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // no ContextTimeoutEnabled
	defer rdb.Close()
	err := redisstore.BreakerConfig{Client: rdb, Name: "payments"}.Validate()
	fmt.Println(err)
	// Output: redisstore: invalid config: BreakerConfig.Client: ContextTimeoutEnabled is false, so Timeout could not bound Redis calls; set it in the client's options
}
