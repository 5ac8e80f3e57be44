package throttle

// Answer is done without an Acquire: the reference tables drive the rate
// at given instants without waiting for tokens.
func (a *Adaptive) Answer(err error) { a.record(err) }
