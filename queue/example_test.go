package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

func ExampleQueue() {
	q := queue.New(queue.Config[string]{
		Capacity: 100,
		MaxBatch: 2,
		Linger:   time.Minute, // Close flushes a partial batch at once
	}, func(ctx context.Context, batch []string) error {
		fmt.Println("deliver", batch)
		return nil
	})
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		q.Offer(r)
	}
	remaining, err := q.Close(context.Background())
	s := q.Stats()
	fmt.Println("remaining", remaining, err)
	fmt.Println("offered", s.Offered, "delivered", s.Delivered, "dropped", s.DroppedFull+s.DroppedPermanent)
	// Output:
	// deliver [a b]
	// deliver [c d]
	// deliver [e]
	// remaining 0 <nil>
	// offered 5 delivered 5 dropped 0
}

func ExampleScheduler() {
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 2,
		Policy: &retry.Policy{
			MaxAttempts: 5,
			Backoff:     backoff.Exponential{Base: time.Millisecond, Max: 10 * time.Millisecond, Jitter: backoff.Full},
		},
	})
	attempts := 0
	s.Submit(func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return fmt.Errorf("webhook attempt %d: %w", attempts, errors.New("503"))
		}
		return nil
	}, func(err error) {
		fmt.Println("webhook delivered after", attempts, "attempts, err:", err)
	})
	s.Submit(func(ctx context.Context) error {
		return retry.Permanent(errors.New("410 gone"))
	}, func(err error) {
		fmt.Println("sync gave up:", err)
	})

	// Close waits for both tasks, waits between retries included.
	n, err := s.Close(context.Background())
	st := s.Stats()
	fmt.Println("abandoned", n, err)
	fmt.Println("succeeded", st.Succeeded, "failed", st.Failed)
	// Unordered output:
	// webhook delivered after 3 attempts, err: <nil>
	// sync gave up: 410 gone
	// abandoned 0 <nil>
	// succeeded 1 failed 1
}

// A Scheduler delivering webhooks to many hosts, with one breaker per
// host: SubmitKey gives each task its host's breaker, so the host that is
// down stops only its own deliveries.
func ExampleScheduler_SubmitKey() {
	breakers, err := keyed.NewBreakers(keyed.Config{}, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
	if err != nil {
		panic(err)
	}
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 1,
		Policy:  &retry.Policy{MaxAttempts: 1, Breaker: breakers},
	})
	deliver := func(host string) {
		done := make(chan error, 1)
		s.SubmitKey(host, func(ctx context.Context) error {
			if keyed.KeyFrom(ctx) == "down.example" {
				return errors.New("503")
			}
			return nil
		}, func(err error) { done <- err })
		fmt.Printf("%s: %v\n", host, <-done)
	}
	deliver("down.example")
	deliver("down.example") // its breaker is open now
	deliver("up.example")   // its own breaker is closed
	s.Close(context.Background())
	// Output:
	// down.example: retry: attempts exhausted after 1 attempts: 503
	// down.example: breaker: open (after 0 attempts)
	// up.example: <nil>
}
