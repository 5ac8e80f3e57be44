package admission

// Source gives the Limiter that admits a request arriving now. A
// *Limiter is a Source that never changes; config's *AdmissionHandle is
// one that a reload of the policy file swaps. Adapters that take a
// Source (grpcretry's adaptive interceptors) ask it once per request and
// end each Permit with the Limiter that gave it, so a swap takes effect
// at the next request while the requests in flight finish under the old
// Limiter.
type Source interface {
	// Limiter returns the Limiter in force. It must be safe for
	// concurrent use and cheap: it is called on every request.
	Limiter() *Limiter
}

// Limiter returns l itself, which makes a *Limiter a Source that never
// changes. A nil *Limiter gives nil.
func (l *Limiter) Limiter() *Limiter { return l }
