// Package fastpath is the seam through which retry makes the first attempt
// of a call whose Breaker is a *breaker.Breaker and whose Budget is a
// *budget.Ratio (either may be nil) with one look-up of the processor
// (stripe.Hint) for both, and with direct calls in place of the breaker's
// done function and the budget's Record: it is the same bookkeeping, in
// the same per-processor cells, that Allow's done and Record do.
//
// The breaker and budget packages fill in Breaker and Budget from their
// init functions: the type word of their pointer type held in a
// retry.Breaker or a retry.Budget (its itab, the first word of the
// interface value), the functions retry may call for such a value, and
// where the words are that the most common of those functions read and
// write (offsets, taken with unsafe.Offsetof by the package that owns the
// type). retry calls a function only for an interface value whose type
// word is the registered one, passing the value's data word, so each
// function receives a pointer of its own type; Current, Fast, DoneOf,
// IsCurrent, AddSuccess and AddFirstOK do the work of Admit, Succeed and
// FirstOK on the common path from the registered offsets, so that they
// inline into retry and cost no call. Until a package registers (a
// package variable initialised by a retry.Do during its own
// initialisation), Tab is 0, which no non-nil interface value has, and
// retry takes its ordinary path.
package fastpath

import (
	"sync/atomic"
	"unsafe"
)

// Breaker is what breaker registers for *breaker.Breaker. Its functions
// are leaves (they call nothing, and so cost no stack frame) on the paths
// a call takes when the breaker is closed or open: the rarer work is left
// to a second function, or to Allow, which the caller calls when told. Its
// offsets are stored before Tab, as its functions are.
var Breaker struct {
	// Tab is the type word of a *breaker.Breaker in a retry.Breaker,
	// stored after the functions (a retry.Do on a goroutine that an
	// earlier package's init started may read it while breaker's init
	// runs).
	Tab atomic.Uintptr
	// Admit asks breaker b (possibly nil) to admit one attempt, as Allow
	// does, and returns Allow's done and error, except that done and err
	// both nil mean that the caller must ask Allow itself (a half-open
	// breaker, an open period that may have ended, a nil b). When b is
	// closed and counts consecutive failures with one done function
	// shared by the calls of its state, e is that state (its epoch), and a
	// success of the attempt may be counted by Succeed instead of
	// done(nil); e is nil otherwise.
	Admit func(b unsafe.Pointer) (e unsafe.Pointer, done func(error), err error)
	// AdmitFirst is Admit for the first attempt of a call that nobody
	// observes, as retry.Do makes it: it returns what Admit returns,
	// except that where Admit refuses the attempt with the open state's
	// error, AdmitFirst returns, with done nil, the error the call ends
	// with, b's prebuilt RefusalError of it (a *retry.Error). A breaker
	// without one is left to Allow (done and err nil), as a half-open one.
	AdmitFirst func(b unsafe.Pointer) (e unsafe.Pointer, done func(error), refusal error)
	// Succeed counts the success of an attempt that Admit admitted in
	// state e, in the cell of hint (a stripe.Hint), as done(nil) does,
	// except that when it reports true the caller must call EndStreak(b,
	// e) to finish: the success ended a run of failures.
	Succeed func(b, e unsafe.Pointer, hint int) (endStreak bool)
	// EndStreak ends the run of failures of state e for the success
	// Succeed counted.
	EndStreak func(b, e unsafe.Pointer)
	// Refusal is b's RefusalError for the error refused that Admit or
	// Allow returned: the *retry.Error built once per breaker, or nil
	// (an untyped nil) for any other error.
	Refusal func(b unsafe.Pointer, refused error) error
	// Cur, Successes and Streak locate, in a *breaker.Breaker, the words
	// that Admit and Succeed read and write, for Current, IsCurrent and
	// AddSuccess: the current state (an atomic pointer), the striped
	// count of successes, and the streak word (an atomic.Uint64 whose low
	// 32 bits count the failures in a row).
	Cur       uintptr
	Successes Counter
	Streak    uintptr
	// Fast and Done locate, in a state that Cur points to (whose words
	// never change once it is current), the words Admit reads for an
	// attempt of the closed state, for Fast and DoneOf: whether its calls
	// share one done function whose successes Succeed may count (a bool),
	// and that function (a func(error)).
	Fast, Done uintptr
}

// Budget is what budget registers for *budget.Ratio. FirstOK is a leaf,
// as Breaker's functions are; its offsets are stored before Tab, as its
// functions are.
var Budget struct {
	// Tab is the type word of a *budget.Ratio in a retry.Budget, stored
	// after the functions, as Breaker.Tab is.
	Tab atomic.Uintptr
	// FirstOK records, in the cell of hint (a stripe.Hint), a successful
	// first attempt to Ratio r (possibly nil), as Record(false, nil)
	// does, except that when it reports true the caller must call
	// Refill(r, hint) to finish: the bucket was not full.
	FirstOK func(r unsafe.Pointer, hint int) (refill bool)
	// Refill adds the refill of a successful first attempt that FirstOK
	// counted, in the cell of hint.
	Refill func(r unsafe.Pointer, hint int)
	// FirstOKs, Tokens and Max locate, in a *budget.Ratio, the words that
	// FirstOK reads and writes, for AddFirstOK: the striped count of
	// successful first attempts, the balance (an atomic.Int64) and the
	// bucket's size (an int64 that never changes).
	FirstOKs    Counter
	Tokens, Max uintptr
}

// Counter locates one striped counter (an atomic.Uint64 in each cell of a
// stripe.Array) of the values of a registered type: the counter of the
// cell of hint h (a stripe.Hint, in [0, stripe.N)) of the value at p is
// at p + Off + h*Stride.
type Counter struct{ Off, Stride uintptr }

// Current returns the current state of the *breaker.Breaker at b (not
// nil), its word at Breaker.Cur, as Admit reads it: written out so that it
// inlines. Fast reports whether Admit admits an attempt of state e with
// Succeed counting its success, and DoneOf gives then Admit's done (e's
// words at Breaker.Fast and Breaker.Done, which never change).
func Current(b unsafe.Pointer) (e unsafe.Pointer) {
	return atomic.LoadPointer((*unsafe.Pointer)(unsafe.Add(b, Breaker.Cur)))
}

// Fast reports whether the calls of state e (Current's) share one done
// function whose successes Succeed may count: Admit returns e and DoneOf(e).
func Fast(e unsafe.Pointer) bool { return *(*bool)(unsafe.Add(e, Breaker.Fast)) }

// DoneOf returns the done function shared by the calls of state e, for e
// that Fast accepts.
func DoneOf(e unsafe.Pointer) func(error) { return *(*func(error))(unsafe.Add(e, Breaker.Done)) }

// IsCurrent reports whether e is still the current state of the
// *breaker.Breaker at b (its word at Breaker.Cur): Breaker.Succeed's first
// step, which AddSuccess follows, written out so that it inlines.
func IsCurrent(b, e unsafe.Pointer) bool {
	return atomic.LoadPointer((*unsafe.Pointer)(unsafe.Add(b, Breaker.Cur))) == e
}

// AddSuccess is the rest of Breaker.Succeed(b, e, h) for a state e that
// IsCurrent found current, written out from the words it reads and writes
// (Breaker.Successes and Streak) so that it inlines: it counts one success
// in the cell of hint h and reports whether a run of failures is under
// way, which the caller ends with Breaker.EndStreak(b, e).
func AddSuccess(b unsafe.Pointer, h int) (endStreak bool) {
	atomic.AddUint64((*uint64)(unsafe.Add(b, Breaker.Successes.Off+uintptr(h)*Breaker.Successes.Stride)), 1)
	return uint32(atomic.LoadUint64((*uint64)(unsafe.Add(b, Breaker.Streak)))) != 0
}

// AddFirstOK is Budget.FirstOK(r, h) for r not nil, written out from the
// words it reads and writes (Budget.FirstOKs, Tokens and Max) so that it
// inlines: it counts a successful first attempt in the cell of hint h and
// reports whether the bucket is not full, in which case the caller adds
// the attempt's refill with Budget.Refill(r, h).
func AddFirstOK(r unsafe.Pointer, h int) (refill bool) {
	atomic.AddUint64((*uint64)(unsafe.Add(r, Budget.FirstOKs.Off+uintptr(h)*Budget.FirstOKs.Stride)), 1)
	return atomic.LoadInt64((*int64)(unsafe.Add(r, Budget.Tokens))) != *(*int64)(unsafe.Add(r, Budget.Max))
}

// Iface is the layout of an interface value (any interface type, not the
// empty interface): a pointer to a retry.Breaker or a retry.Budget may be
// read as a *Iface. TypeWord and DataWord read the same words; a hot path
// may read them through an *Iface, which is no call, to keep its code
// free of the marks the compiler leaves for inlined calls.
type Iface struct {
	Tab  uintptr        // the type word: 0 when the value is nil
	Data unsafe.Pointer // the data word: the pointer held, for a pointer type
}

// TypeWord returns the type word of the interface value at p (any
// interface type, not the empty interface): 0 when it is nil.
func TypeWord(p unsafe.Pointer) uintptr { return *(*uintptr)(p) }

// DataWord returns the data word of the interface value at p: the pointer
// it holds, for a pointer type.
func DataWord(p unsafe.Pointer) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(p, unsafe.Sizeof(uintptr(0))))
}
