// Package stripe spreads counters that many goroutines update at once over
// cells on separate cache lines, so that goroutines running in parallel
// rarely write the same line.
//
// A counter that every call of a hot path increments (a breaker's
// successes, a budget's refusals) is a single cache line that every core
// must own in turn: on two cores an atomic add that costs a few
// nanoseconds alone costs several times that when both cores do it. A
// striped counter gives each goroutine one of N cells, picked by Hint from
// the processor (the runtime's P) it runs on, and a reader sums the cells.
//
// Use Counter for one striped number, and Array when a call updates one of
// several counters: a cell of Array holds all of them, so that a call
// touches one cache line and the whole set costs one Hint.
//
// A sum read while writers are at work is a sum of cells each read
// atomically, not a snapshot: it counts some of the concurrent updates and
// not others. Once the writers are quiescent the sum is exact. Counters
// only grow (or wrap around, as uint64 arithmetic does); a cell is never
// reset, so a caller that needs counts since some event subtracts the sums
// taken then.
//
// Striping trades memory for scaling: an Array of T takes about
// N × (size of T + 128) bytes. Use it where a benchmark run in parallel
// shows contention on a shared counter, not by default.
package stripe
