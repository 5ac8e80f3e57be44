package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// Without jitter every client waits exactly the same: 100ms, 200ms, 400ms …
// capped at Max. Fine for one process, dangerous for a fleet.
func ExampleExponential() {
	e := backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second}
	var prev time.Duration
	for n := 1; n <= 5; n++ {
		prev = e.Delay(n, prev)
		fmt.Println(prev)
	}
	// Output:
	// 100ms
	// 200ms
	// 400ms
	// 800ms
	// 1s
}

// Full jitter draws uniformly from [0, T]: the best spread of retries in time
// and the default of retry.Policy.
func ExampleExponential_fullJitter() {
	e := backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Full, Rand: rand.NewPCG(1, 2)}
	for n := 1; n <= 4; n++ {
		d := e.Delay(n, 0)
		ceil := min(time.Second, 100*time.Millisecond<<(n-1))
		fmt.Printf("retry %d: within [0, %v]: %v\n", n, ceil, d >= 0 && d <= ceil)
	}
	// Output:
	// retry 1: within [0, 100ms]: true
	// retry 2: within [0, 200ms]: true
	// retry 3: within [0, 400ms]: true
	// retry 4: within [0, 800ms]: true
}

// Equal jitter keeps half of the delay and draws the other half: [T/2, T].
func ExampleExponential_equalJitter() {
	e := backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Equal, Rand: rand.NewPCG(3, 4)}
	d := e.Delay(3, 0)
	fmt.Println(d >= 200*time.Millisecond && d <= 400*time.Millisecond)
	// Output: true
}

// Decorrelated jitter (the AWS form) grows from the previous delay:
// min(Max, uniform[Base, 3·prev]).
func ExampleExponential_decorrelatedJitter() {
	e := backoff.Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.Decorrelated, Rand: rand.NewPCG(5, 6)}
	var prev time.Duration
	ok := true
	for n := 1; n <= 20; n++ {
		d := e.Delay(n, prev)
		ok = ok && d >= 10*time.Millisecond && d <= min(time.Second, 3*max(prev, 10*time.Millisecond))
		prev = d
	}
	fmt.Println(ok)
	// Output: true
}

// Proportional jitter spreads ±Factor around the schedule, as gRPC and
// cenkalti/backoff do.
func ExampleExponential_proportionalJitter() {
	e := backoff.Exponential{Base: time.Second, Max: time.Minute, Jitter: backoff.Proportional, Factor: 0.2, Rand: rand.NewPCG(7, 8)}
	d := e.Delay(1, 0)
	fmt.Println(d >= 800*time.Millisecond && d <= 1200*time.Millisecond)
	// Output: true
}

// Strategies can be built by name, as configuration files do.
func ExampleNew() {
	s, err := backoff.New("exponential", backoff.Params{Base: 50 * time.Millisecond, Max: 150 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Delay(1, 0), s.Delay(2, 0), s.Delay(3, 0))
	// Output: 50ms 100ms 150ms
}
