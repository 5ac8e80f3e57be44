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

	// run is the consecutive condition's word (see runWord): what Redis
	// needs to judge runs of failures exactly across batches.
	_   [64]byte
	run atomic.Uint64
	// local is set when an outcome was counted before the process first
	// joined the shared state: the batch then applies to whatever closed
	// state Redis holds. (Outcomes counted while degraded count toward
	// the generation the process last saw, like any other.)
	local atomic.Bool
	_     [64]byte
}

// The run word packs, for the failures counted since the last flush:
// sawSuccess (a success came in the batch), the leading run (failures
// before the first success; all of them if none), the longest run, and the
// trailing run (failures since the last success). Each run saturates at
// runMax.
const (
	sawSuccess = 1 << 63
	runBits    = 21
	runMax     = 1<<runBits - 1
)

func runWord(saw bool, lead, longest, trail uint64) uint64 {
	w := lead<<(2*runBits) | longest<<runBits | trail
	if saw {
		w |= sawSuccess
	}
	return w
}

func splitRun(w uint64) (saw bool, lead, longest, trail uint64) {
	return w&sawSuccess != 0, w >> (2 * runBits) & runMax, w >> runBits & runMax, w & runMax
}

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
	lead, longest, trail                uint64
	local                               bool
}

func (b batch) empty() bool {
	return b.requests+b.successes+b.failures+b.slow == 0 && !b.saw && b.longest == 0
}

func (a *accumulator) cell() *cell { return a.cells.Local() }

// success notes a success for the consecutive condition. It writes shared
// memory only when it ends a run of failures (or is the batch's first).
func (a *accumulator) success() {
	for {
		w := a.run.Load()
		if w&sawSuccess != 0 && w&runMax == 0 {
			return
		}
		if a.run.CompareAndSwap(w, (w|sawSuccess)&^runMax) {
			return
		}
	}
}

// failure notes a failure for the consecutive condition.
func (a *accumulator) failure() {
	for {
		w := a.run.Load()
		saw, lead, longest, trail := splitRun(w)
		trail = min(trail+1, runMax)
		longest = max(longest, trail)
		if !saw {
			lead = trail
		}
		if a.run.CompareAndSwap(w, runWord(saw, lead, longest, trail)) {
			return
		}
	}
}

// empty reports whether the accumulator holds nothing to flush.
func (a *accumulator) empty() bool {
	if a.run.Load() != 0 || a.local.Load() {
		return false
	}
	for i := range stripe.N {
		c := a.cells.At(i)
		if c.successes.Load()|c.failures.Load()|c.excluded.Load()|c.slow.Load() != 0 {
			return false
		}
	}
	return true
}

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
	b.saw, b.lead, b.longest, b.trail = splitRun(a.run.Swap(0))
	b.local = a.local.Swap(false)
	return b
}
