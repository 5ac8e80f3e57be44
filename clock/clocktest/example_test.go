package clocktest_test

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// A test drives code that waits on the clock without sleeping: BlockUntil
// returns once the code has started its wait, and Advance fires the timer.
func ExampleFake() {
	fake := clocktest.NewFake()
	waited := make(chan time.Duration)
	go func() { // the code under test
		start := fake.Now()
		<-clock.After(fake, 5*time.Second)
		waited <- fake.Since(start)
	}()

	fake.BlockUntil(1)
	fmt.Println("pending:", fake.Deadlines())
	fake.Advance(5 * time.Second)
	fmt.Println("waited", <-waited)
	fmt.Println("pending:", fake.Pending())
	// Output:
	// pending: [5s]
	// waited 5s
	// pending: 0
}
