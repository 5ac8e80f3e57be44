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
// interface value), and the functions retry may call for such a value.
// retry calls a function only for an interface value whose type word is
// the registered one, passing the value's data word, so each function
// receives a pointer of its own type. Until a package registers (a package
// variable initialised by a retry.Do during its own initialisation), Tab is
// 0, which no non-nil interface value has, and retry takes its ordinary
// path.
package fastpath

import (
	"sync/atomic"
	"unsafe"
)

// Breaker is what breaker registers for *breaker.Breaker. Its functions
// are leaves (they call nothing, and so cost no stack frame) on the paths
// a call takes when the breaker is closed or open: the rarer work is left
// to a second function, or to Allow, which the caller calls when told.
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
}

// Budget is what budget registers for *budget.Ratio. FirstOK is a leaf,
// as Breaker's functions are.
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
