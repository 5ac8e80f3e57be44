package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// One budget per downstream, shared by every call to it. When the
// downstream fails everything, the budget stops retries once its starting
// tokens are spent: calls fail fast with ErrBudgetExhausted instead of
// multiplying the load.
func Example() {
	users := budget.NewRatio(budget.TenPercent())
	policy := retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Constant{}, // no waiting, for the example
		Budget:      users,
	}
	errDown := errors.New("users: unavailable")
	attempts := 0
	for range 100 {
		err := retry.Run(context.Background(), &policy, func(context.Context) error {
			attempts++
			return errDown
		})
		_ = err // errors.Is(err, errDown) holds, and errors.Is(err, retry.ErrBudgetExhausted) once the budget is spent
	}
	fmt.Println("attempts for 100 failing calls:", attempts)
	fmt.Printf("%+v\n", users.Stats())
	// Output:
	// attempts for 100 failing calls: 110
	// {Requests:100 Retries:10 Deposits:0 Granted:10 Refused:97 Refunded:0}
}

// A bucket of one's own: retries up to 5% of successful calls, a burst of
// at most 20, retries after a timeout costing double, and no retry while
// the bucket is down to its last 4 tokens.
func ExampleNewRatio() {
	b := budget.NewRatio(budget.RatioConfig{
		MaxTokens:   20,
		Refill:      0.05,
		RetryCost:   1,
		TimeoutCost: 2,
		Threshold:   4,
	})
	granted := 0
	for b.Withdraw(context.DeadlineExceeded) {
		granted++
	}
	fmt.Println("timeout retries from a full bucket:", granted, "leaving", b.Available())
	for range 100 {
		b.Record(false, nil)
	}
	fmt.Println("after 100 successes:", b.Available())
	// Output:
	// timeout retries from a full bucket: 8 leaving 4
	// after 100 successes: 9
}

// gRPC A6 retry throttling: each failed attempt takes a token, each success
// adds 0.1, and retries stop while the bucket holds half its tokens or
// fewer.
func ExampleGRPC() {
	b := budget.NewRatio(budget.GRPC())
	errDown := errors.New("unavailable")
	for i := 1; i <= 6; i++ {
		b.Record(false, errDown)
		fmt.Printf("failure %d: %.1f tokens, retry granted: %v\n", i, b.Available(), b.Withdraw(errDown))
	}
	for range 3 {
		b.Record(false, nil)
	}
	fmt.Printf("3 successes: %.1f tokens, retry granted: %v\n", b.Available(), b.Withdraw(errDown))
	// Output:
	// failure 1: 9.0 tokens, retry granted: true
	// failure 2: 8.0 tokens, retry granted: true
	// failure 3: 7.0 tokens, retry granted: true
	// failure 4: 6.0 tokens, retry granted: true
	// failure 5: 5.0 tokens, retry granted: false
	// failure 6: 4.0 tokens, retry granted: false
	// 3 successes: 4.3 tokens, retry granted: false
}

// The 10% budget: ten successful calls pay for one retry.
func ExampleTenPercent() {
	b := budget.NewRatio(budget.RatioConfig{StartEmpty: true}) // TenPercent, starting empty
	errDown := errors.New("unavailable")
	fmt.Println("retry granted:", b.Withdraw(errDown))
	for range 10 {
		b.Record(false, nil)
	}
	fmt.Println("after 10 successes, retry granted:", b.Withdraw(errDown))
	fmt.Println("and another:", b.Withdraw(errDown))
	// Output:
	// retry granted: false
	// after 10 successes, retry granted: true
	// and another: false
}

// Finagle's retry budget: 20% of the requests of the last 10 seconds, plus
// 10 retries per second so that quiet clients can retry too.
func ExampleNewWindow() {
	clk := clocktest.NewFake() // tests and the simulator drive time; nil means the real clock
	b := budget.NewWindow(budget.WindowConfig{Clock: clk})
	fmt.Println("no traffic:", b.Available())
	for range 500 {
		b.Record(false, nil)
	}
	fmt.Println("500 requests:", b.Available())
	granted := 0
	for b.Withdraw(errors.New("unavailable")) {
		granted++
	}
	fmt.Println("granted:", granted)
	clk.Advance(10 * time.Second)
	fmt.Println("10s later:", b.Available())
	// Output:
	// no traffic: 100
	// 500 requests: 200
	// granted: 200
	// 10s later: 100
}

// Envoy's retry budget: retries in flight at most 20% of requests in
// flight, and at least 3. retry.Do makes the Start, Record and Refund calls
// that keep it informed.
func ExampleNewConcurrency() {
	b := budget.NewConcurrency(budget.ConcurrencyConfig{})
	for range 50 {
		b.Start(false) // 50 requests in flight
	}
	fmt.Println("retries allowed in flight:", b.Available())
	errDown := errors.New("unavailable")
	granted := 0
	for b.Withdraw(errDown) {
		granted++
	}
	fmt.Println("granted:", granted)
	b.Refund() // one retry given up during its backoff
	requests, retries := b.Active()
	fmt.Println("active:", requests, "requests,", retries, "retries")
	// Output:
	// retries allowed in flight: 10
	// granted: 10
	// active: 50 requests, 9 retries
}
