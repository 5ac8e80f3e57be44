package stripe

import (
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// bits is log2 of N.
const bits = 4

// N is the number of cells of an Array or a Counter, and the bound of Hint.
const N = 1 << bits

// pad separates the cells: at least 128 bytes between the data of two
// cells keeps them on distinct cache lines, and out of the pairs of lines
// that some processors fetch together.
const pad = 128

// Hint returns a cell index in [0, N) for the calling goroutine: the
// number of the processor (the runtime's P) it runs on, modulo N. At most
// GOMAXPROCS goroutines run at once, each on its own P, so goroutines
// running in parallel get distinct indexes when GOMAXPROCS <= N, however
// many goroutines there are and wherever their stacks lie.
//
// A goroutine may be moved to another P right after Hint returns, and two
// goroutines of one P share an index: Hint is a performance hint, never a
// basis for correctness. It costs about as much as a function call.
func Hint() int { return procID() & (N - 1) }

// procID returns the caller's P number, as sync.Pool finds its per-P
// cache: runtime.procPin is kept callable by linkname (go.dev/issue/67401,
// "Do not remove or change the type signature").
func procID() int {
	id := procPin()
	procUnpin()
	return id
}

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Pin is the runtime's procPin, which Hint calls: it returns the number of
// the calling goroutine's P and keeps the goroutine on it, not preempted,
// until Unpin. Pin()&(N-1), then Unpin(), is Hint without its call, for a
// hot path that takes one hint for several Arrays (use For).
//
//go:linkname Pin runtime.procPin
func Pin() int

// Unpin ends what Pin began (the runtime's procUnpin).
//
//go:linkname Unpin runtime.procUnpin
func Unpin()

// Array is N values of T, each on cache lines of its own. A goroutine
// updates the cell Local returns, with atomic operations (T is typically a
// struct of atomic.Uint64 counters); a reader walks every cell with At.
// The zero value is N zero values of T. An Array must not be copied after
// first use.
//
// The Array is padded before its first cell and after each cell, so fields
// of the struct that holds it stay off its cells' cache lines.
type Array[T any] struct {
	_     [pad]byte
	cells [N]cell[T]
}

type cell[T any] struct {
	v T
	_ [pad]byte
}

// Local returns the cell of the calling goroutine's P, At(Hint()).
func (a *Array[T]) Local() *T { return &a.cells[Hint()].v }

// For returns the cell of hint h, a value Hint returned, At(h & (N-1)):
// several counters of one call (a breaker's and a budget's, each an Array
// of its own) share one Hint this way, taken once.
func (a *Array[T]) For(h int) *T { return &a.cells[h&(N-1)].v }

// At returns cell i, for i in [0, N). It panics if i is out of range.
func (a *Array[T]) At(i int) *T { return &a.cells[i].v }

// Counter is a uint64 counter striped over N cells: Add writes only the
// calling goroutine's cell and Load sums them. The zero value is 0. A
// Counter must not be copied after first use.
type Counter struct {
	a Array[atomic.Uint64]
}

// Add adds n to the counter (to subtract, add ^uint64(n-1), as with
// atomic.Uint64).
func (c *Counter) Add(n uint64) { c.a.Local().Add(n) }

// Load returns the sum of the cells. While Add runs concurrently it is a
// sum of cells each read atomically (see the package documentation);
// otherwise it is exact.
func (c *Counter) Load() uint64 {
	var s uint64
	for i := range N {
		s += c.a.At(i).Load()
	}
	return s
}
