package redisstore_test

import (
	"log"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/redisstore"
)

// A policy file whose breaker and budget say shared: redis gets
// fleet-wide ones from a Store; the connection stays in code, never in
// the file. (Not run: it needs the file and a Redis.)
func ExampleStore() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	store := &redisstore.Store{Client: rdb, Namespace: "checkout"}
	reg, err := config.Open("policies.yaml", config.Options{Shared: map[string]config.SharedStore{"redis": store}})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close() // closes the Breakers and Budgets it built
	_ = reg.Policy("payments").Policy()
}
