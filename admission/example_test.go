package admission_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/stormguard/stormguard/admission"
)

// A Limiter in front of some work: admitted requests end their Permit,
// shed ones say why.
func Example() {
	l, err := admission.New(admission.Config{}) // Gradient2, CoDel queue, adaptive LIFO
	if err != nil {
		panic(err)
	}
	p, err := l.Acquire(context.Background())
	if errors.Is(err, admission.ErrShed) {
		fmt.Println("shed:", err)
		return
	}
	// ... serve the request ...
	p.Release()
	fmt.Println("limit", l.Limit(), "in flight", l.InFlight())
	// Output: limit 20 in flight 0
}
