package hedge

import (
	"unsafe"

	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/retry"
)

// fusedFirst is what do found of the breaker and the budget of a first
// attempt it began as retry.Do's fused first attempt begins it: a
// *breaker.Breaker and a *budget.Ratio (either may be nil), their types
// checked after the context's Err, the last user code before the attempt,
// and their data words read there once (internal/fastpath). The fastpath
// functions are only ever given these words, whatever op does to the
// Policy.
type fusedFirst struct {
	bp, rp unsafe.Pointer // the Breaker's and the Budget's data words
	e      unsafe.Pointer // the breaker's closed state, when fastpath.Breaker.Succeed may count a success
	ok     bool           // do began the attempt so
	done   bool           // the breaker gave a done function
}

// inlineFirst reports whether a first attempt under p needs nothing set
// up around it but the breaker and the budget, as retry.BeginInline asks
// (retry's Policy.inlineFirst).
func inlineFirst(p *retry.Policy) bool {
	return p.Observer == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && p.Limiter == nil && p.NestedBudget == nil
}

// refusal is the error of a call whose first attempt the *breaker.Breaker
// at bp refused with refused, nobody observing the call, as
// retry.BeginInline gives it: the breaker's prebuilt *retry.Error, or one
// built as retry builds it for a refusal of another error (which a
// *breaker.Breaker does not return).
func refusal(bp unsafe.Pointer, refused error) error {
	if err := fastpath.Breaker.Refusal(bp, refused); err != nil {
		return err
	}
	return &retry.Error{Reason: refused}
}

// inlineOf is the retry.Inline whose breaker's permit is done, as
// retry.BeginInline returns it: retry.Inline is that one function
// (TestInlineOfLayout checks it), and retry has no constructor for it.
func inlineOf(done func(error)) (in retry.Inline) {
	*(*func(error))(unsafe.Pointer(&in)) = done
	return in
}

// inlineDone is the breaker's permit of in, inlineOf's inverse (nil for
// the zero Inline).
func inlineDone(in retry.Inline) func(error) {
	return *(*func(error))(unsafe.Pointer(&in))
}
