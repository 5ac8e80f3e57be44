package retry

// PrebuiltRefusal is implemented by a Breaker that builds once the *Error
// Do gives up with when it refuses a call's first attempt, so that such a
// refusal — the cost of every call while a downstream is out — allocates
// nothing. breaker.Breaker implements it.
//
// Do, Run and BeginInline use it for a first attempt the breaker refused
// when the Policy has no Observer (an Observer hears each refused call end
// with an *Error of its own). The *Error is then shared by every call the
// breaker refuses: do not modify it.
type PrebuiltRefusal interface {
	// RefusalError returns the *Error for a call refused before its first
	// attempt with refusal, an error Allow returned: Attempts 0, Reason
	// refusal, Last and Cause nil. It returns nil to have Do build one.
	RefusalError(refusal error) *Error
}

// refused returns the *Error of a call whose first attempt the breaker
// refused with refusal, when nobody observes the call and the breaker has
// it prebuilt; otherwise nil.
func (c *Call) refused(refusal error) *Error {
	if c.obs != nil || c.n != 0 || c.last != nil {
		return nil
	}
	if pr, ok := c.p.Breaker.(PrebuiltRefusal); ok {
		return pr.RefusalError(refusal)
	}
	return nil
}
