package retry

import (
	"context"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/stormguard/stormguard/backoff"
)

// What Do's first attempt asks of every call's Breaker and Budget — is it
// a group, is the budget a BudgetTracker — costs two of the runtime's type
// assertions, a hash probe each. The answer depends only on the dynamic
// type, which an interface value names by its first word (its itab, never
// freed nor moved), so the first type found to be a plain Breaker and the
// first found to be a plain Budget (neither a group nor a tracker) are
// remembered here: a call whose Breaker or Budget has that type answers
// with one comparison, as does a nil Breaker or Budget (type word 0). Each
// is written once (the first such type wins), so parallel callers only read
// them.
var plainBreakerTab, plainBudgetTab atomic.Uintptr

// typeWord is the first word of the interface value at p: its itab.
func typeWord(p unsafe.Pointer) uintptr { return *(*uintptr)(p) }

// breakerIsGroup reports whether b is a BreakerGroup.
func breakerIsGroup(b *Breaker) bool {
	if w := typeWord(unsafe.Pointer(b)); w == 0 || w == plainBreakerTab.Load() { // nil (word 0): no group
		return false
	}
	return breakerIsGroupSlow(b)
}

func breakerIsGroupSlow(b *Breaker) bool {
	if *b == nil {
		return false
	}
	if _, ok := (*b).(BreakerGroup); ok {
		return true
	}
	plainBreakerTab.CompareAndSwap(0, typeWord(unsafe.Pointer(b)))
	return false
}

// budgetKind tells of b whether it is a BudgetGroup and, if it is not,
// the BudgetTracker it is (nil if none).
func budgetKind(b *Budget) (group bool, tracker BudgetTracker) {
	if w := typeWord(unsafe.Pointer(b)); w == 0 || w == plainBudgetTab.Load() { // nil (word 0): neither
		return false, nil
	}
	return budgetKindSlow(b)
}

func budgetKindSlow(b *Budget) (group bool, tracker BudgetTracker) {
	switch x := (*b).(type) {
	case nil:
		return false, nil
	case BudgetGroup:
		return true, nil
	case BudgetTracker:
		return false, x
	}
	plainBudgetTab.CompareAndSwap(0, typeWord(unsafe.Pointer(b)))
	return false, nil
}

// plainBackoffTab is, as plainBreakerTab, the type word of the first
// backoff.Strategy type found not to be an ErrorBackoff, which Next asks
// of every retry's Backoff.
var plainBackoffTab atomic.Uintptr

// errorBackoff returns b as an ErrorBackoff, if it is one.
func errorBackoff(b *backoff.Strategy) (ErrorBackoff, bool) {
	if w := typeWord(unsafe.Pointer(b)); w == plainBackoffTab.Load() {
		return nil, false
	}
	eb, ok := (*b).(ErrorBackoff)
	if !ok {
		plainBackoffTab.CompareAndSwap(0, typeWord(unsafe.Pointer(b)))
	}
	return eb, ok
}

// isCanceled reports whether e is context.Canceled, as e ==
// context.Canceled does. context.Canceled is a pointer (errors.New's), so
// two interface values are equal exactly when both their words are: that
// spares every error of errors.New's type (most sentinels) the runtime's
// comparison, which its type word alone does not decide.
func isCanceled(e error) bool {
	if canceledIsPointer {
		return *(*[2]uintptr)(unsafe.Pointer(&e)) == *(*[2]uintptr)(unsafe.Pointer(&context.Canceled))
	}
	return e == context.Canceled
}

// canceledIsPointer is whether context.Canceled's dynamic type is a
// pointer, which isCanceled's comparison of words needs.
var canceledIsPointer = reflect.TypeOf(context.Canceled).Kind() == reflect.Pointer
