package retry

// PolicySource gives the Policy a call runs under. Adapters that are built
// once and serve many calls (httpretry's Transport, grpcretry's
// interceptors) take a PolicySource and ask it once per call, so a policy
// that changes — a config.Handle after a reload — reaches every setting of
// the next call without rebuilding the client. *Policy is a PolicySource
// that always gives itself; config.Handle gives the policy last loaded,
// with one atomic load.
type PolicySource interface {
	// Policy returns the Policy for a call starting now; nil is the zero
	// Policy. It must be safe for concurrent use and cheap: it is called
	// on every call.
	Policy() *Policy
}

// Policy returns p itself, which makes a *Policy a PolicySource that never
// changes. A nil *Policy gives nil, the zero Policy.
func (p *Policy) Policy() *Policy { return p }
