package keyed_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// One breaker per host: host a's failures open a's breaker, and host b's
// calls go on. The key travels in the context; httpretry.WithKey and
// hedge.Transport.Key put it there for HTTP requests.
func Example() {
	breakers, err := keyed.NewBreakers(keyed.Config{MaxKeys: 100}, breaker.Config{ConsecutiveFailures: 2})
	if err != nil {
		panic(err)
	}
	p := &retry.Policy{MaxAttempts: 1, Breaker: breakers}
	down := errors.New("connection refused")

	a := keyed.WithKey(context.Background(), "https://a.example:443")
	b := keyed.WithKey(context.Background(), "https://b.example:443")
	for range 2 {
		_ = retry.Run(a, p, func(context.Context) error { return down })
	}
	errA := retry.Run(a, p, func(context.Context) error { return nil })
	errB := retry.Run(b, p, func(context.Context) error { return nil })
	fmt.Println("host a open:", errors.Is(errA, breaker.ErrOpen))
	fmt.Println("host b:", errB)
	fmt.Println("live keys:", breakers.Stats().Live)
	// Output:
	// host a open: true
	// host b: <nil>
	// live keys: 2
}
