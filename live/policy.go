package live

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// Scope says who shares a policy's retry budget and circuit breaker.
type Scope uint8

// Scopes.
const (
	// Shared: one retry.Policy per policy compared, its budget and breaker
	// shared by every client goroutine, as one process shares them for one
	// downstream (the way stormguard is meant to be used).
	Shared Scope = iota
	// PerClient: every client owns its budget and breaker, as each client
	// process of a sim.Model does (a fleet of separate agents).
	PerClient
)

var scopeNames = [...]string{"shared", "per-client"}

// String returns "shared" or "per-client".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// ParseScope returns the scope named s ("shared", "per-client").
func ParseScope(s string) (Scope, error) {
	for i, n := range scopeNames {
		if strings.EqualFold(s, n) {
			return Scope(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown scope %q (want shared or per-client)", ErrScenario, s)
}

// RetryPolicy turns p, a policy as the simulator defines it, into the
// retry.Policy a live caller uses, on the real clock:
//
//   - MaxElapsed and MinAttemptTime carry over unchanged, and so does a
//     positive MaxAttempts; sim's 0 (no count limit) becomes
//     retry.Unlimited, since retry's 0 means retry.DefaultMaxAttempts.
//   - AttemptTimeout carries over; 0 takes attemptTimeout (the server's
//     Timeout, as sim takes the tier's).
//   - Backoff is built with jitter drawn from jitter (it must be safe for
//     concurrent use, such as backoff.NewSource); a nil Backoff (sim:
//     "retry at once") becomes backoff.Constant{} (no wait), since a nil
//     retry.Policy.Backoff would mean retry.DefaultBackoff.
//   - Budget and Breaker are built with env (its Clock should be
//     clock.Real and its Rand safe for concurrent use when the policy is
//     shared).
//
// sim.Policy.BreakerRetriesOnly has no retry.Policy equivalent; such a
// policy is refused with an error wrapping sim.ErrPolicy.
func RetryPolicy(p sim.Policy, env sim.Env, jitter rand.Source, attemptTimeout time.Duration) (*retry.Policy, error) {
	if p.BreakerRetriesOnly {
		return nil, fmt.Errorf("%w: %s: a breaker for retries only cannot run live", sim.ErrPolicy, p.Name)
	}
	rp := &retry.Policy{
		Operation:      p.Name,
		MaxAttempts:    p.MaxAttempts,
		MaxElapsed:     p.MaxElapsed,
		MinAttemptTime: p.MinAttemptTime,
		AttemptTimeout: p.AttemptTimeout,
		Clock:          env.Clock,
		Backoff:        backoff.Constant{},
	}
	if rp.MaxAttempts <= 0 {
		rp.MaxAttempts = retry.Unlimited
	}
	if rp.AttemptTimeout == 0 {
		rp.AttemptTimeout = attemptTimeout
	}
	if p.Backoff != nil {
		rp.Backoff = p.Backoff(jitter)
	}
	if p.Budget != nil {
		rp.Budget = p.Budget(env)
	}
	if p.Breaker != nil {
		rp.Breaker = p.Breaker(env)
	}
	return rp, nil
}

// policySet is what the clients of one run use: one retry.Policy for every
// client (Shared) or one each (PerClient).
type policySet struct {
	name     string
	policies []*retry.Policy
}

// close stops what the policies' breakers run in the background, if
// anything.
func (s *policySet) close() {
	for _, p := range s.policies {
		if c, ok := p.Breaker.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// buildPolicies makes the policies of one run of p.
func buildPolicies(p sim.Policy, scope Scope, clients int, attemptTimeout time.Duration, seed uint64) (*policySet, error) {
	n := 1
	if scope == PerClient {
		n = clients
	}
	set := &policySet{name: p.Name, policies: make([]*retry.Policy, n)}
	jitter := backoff.NewSource(seed ^ 0x6a09e667f3bcc909)
	var shared *retry.Policy
	for i := range set.policies {
		env := sim.Env{Clock: clock.Real, Rand: backoff.NewSource(splitmix(seed ^ uint64(i+1)*0x3c6ef372fe94f82b))}
		rp, err := RetryPolicy(p, env, jitter, attemptTimeout)
		if err != nil {
			return nil, err
		}
		if shared != nil {
			rp.Backoff = shared.Backoff // one stateless strategy for all
		}
		shared = rp
		set.policies[i] = rp
	}
	return set, nil
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
