package redisstore

import (
	"sync/atomic"

	"github.com/stormguard/stormguard/internal/stripe"
)

// accumulator counts the outcomes of the closed state between two flushes.
// Allow counts nothing; done counts the call's outcome (a call whose done
// has not been called yet is not counted as a request). A call updates the
// cell picked by stripe.Hint, so that goroutines running
// in parallel rarely write the same cache line; a flush swaps every cell
// to zero and sends the sums.
type accumulator struct {
	cells stripe.Array[cell]

	// run is the consecutive condition's word: sawSuccess | failures in a
	// row since the last success (or the last flush).
	_   [64]byte
	run atomic.Uint64
	_   [64]byte
}

// sawSuccess is set in accumulator.run once a success has ended the
// failure runs of the current batch.
const sawSuccess = 1 << 63

type cell struct {
	excluded  atomic.Uint64 // outcomes that count neither way (still requests)
	successes atomic.Uint64
	failures  atomic.Uint64
	slow      atomic.Uint64
}

// batch is what a flush takes from the accumulator.
type batch struct {
	requests, successes, failures, slow uint64
	saw                                 bool
	run                                 uint64
}

func (a *accumulator) cell() *cell { return a.cells.Local() }

// success notes a success for the consecutive condition. It writes shared
// memory only when it ends a run of failures.
func (a *accumulator) success() {
	if w := a.run.Load(); w != sawSuccess {
		a.run.CompareAndSwap(w, sawSuccess)
	}
}

// failure notes a failure for the consecutive condition.
func (a *accumulator) failure() { a.run.Add(1) }

// take empties the accumulator and returns what it held.
func (a *accumulator) take() batch {
	var b batch
	for i := range stripe.N {
		c := a.cells.At(i)
		b.successes += c.successes.Swap(0)
		b.failures += c.failures.Swap(0)
		b.requests += c.excluded.Swap(0)
		b.slow += c.slow.Swap(0)
	}
	b.requests += b.successes + b.failures
	w := a.run.Swap(0)
	b.saw, b.run = w&sawSuccess != 0, w&^sawSuccess
	return b
}
