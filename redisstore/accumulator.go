package redisstore

import (
	"sync/atomic"
	"unsafe"
)

// accumulator counts the outcomes of the closed state between two flushes.
// Allow counts nothing; done counts the call's outcome (a call whose done
// has not been called yet is not counted as a request). A call updates the
// cell picked by stripeHint, so that goroutines running
// in parallel rarely write the same cache line; a flush swaps every cell
// to zero and sends the sums.
type accumulator struct {
	cells [numCells]cell

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
	_         [128 - 4*8]byte // keep neighbours off this cache line pair
}

const numCells = 16

// batch is what a flush takes from the accumulator.
type batch struct {
	requests, successes, failures, slow uint64
	saw                                 bool
	run                                 uint64
}

func (a *accumulator) cell() *cell { return &a.cells[stripeHint()] }

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
	for i := range a.cells {
		c := &a.cells[i]
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

// stripeHint picks a cell for the calling goroutine from the address of its
// stack: goroutines running at the same time have distinct stacks, so they
// mostly pick distinct cells, at no cost and without shared state. The
// address is only hashed, never turned back into a pointer; a stack that
// moves merely picks another cell.
func stripeHint() uint32 {
	var probe byte
	a := uint64(uintptr(unsafe.Pointer(&probe)))
	// Goroutine stacks are at least 2 KiB and aligned to their size, so
	// a>>11 numbers them; Fibonacci hashing spreads neighbours apart.
	return uint32((a >> 11) * 0x9e3779b97f4a7c15 >> 60) // 4 bits: numCells
}
