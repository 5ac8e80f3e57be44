package stripe_test

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/internal/stripe"
)

func ExampleCounter() {
	var hits stripe.Counter
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				hits.Add(1) // writes this goroutine's cell only
			}
		})
	}
	wg.Wait()
	fmt.Println(hits.Load())
	// Output: 8000
}

func ExampleArray() {
	// One cell holds every counter a call may update: a call touches one
	// cache line whichever it updates.
	type outcomes struct{ ok, failed atomic.Uint64 }
	var counts stripe.Array[outcomes]
	record := func(err error) {
		c := counts.Local()
		if err != nil {
			c.failed.Add(1)
		} else {
			c.ok.Add(1)
		}
	}
	record(nil)
	record(nil)
	record(fmt.Errorf("down"))

	var ok, failed uint64
	for i := range stripe.N {
		c := counts.At(i)
		ok += c.ok.Load()
		failed += c.failed.Load()
	}
	fmt.Println(ok, failed)
	// Output: 2 1
}
