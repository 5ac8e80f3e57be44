package clock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// WithTimeout on a fake clock: the deadline passes when the clock is
// advanced, not in real time, and the context then reports the cause.
func ExampleWithTimeout() {
	fake := clocktest.NewFake()
	ctx, cancel := clock.WithTimeout(context.Background(), fake, 2*time.Second, errors.New("attempt timeout"))
	defer cancel()

	deadline, _ := ctx.Deadline()
	fmt.Println("deadline in", deadline.Sub(fake.Now()))
	fake.Advance(time.Second)
	fmt.Println("after 1s:", ctx.Err())
	fake.Advance(time.Second)
	<-ctx.Done()
	fmt.Println("after 2s:", ctx.Err(), "/", context.Cause(ctx))
	// Output:
	// deadline in 2s
	// after 1s: <nil>
	// after 2s: context deadline exceeded / attempt timeout
}

// A nil Clock means the wall clock everywhere in stormguard.
func ExampleOr() {
	fmt.Println(clock.Or(nil) == clock.Real)
	fake := clocktest.NewFake()
	fmt.Println(clock.Or(fake) == clock.Clock(fake))
	// Output:
	// true
	// true
}
