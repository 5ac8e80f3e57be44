// Package keyed isolates failures per key: a Group holds one member (a
// breaker, a budget, a limiter, a hedge delay) per key (a host, a method,
// anything a function of the request gives), each built from one config on
// first use, as Armeria's per-host CircuitBreakerClient and resilience4j's
// CircuitBreakerRegistry do. One dead host then opens its own breaker and
// spends its own budget, and the others go on.
//
// The group is bounded whatever the keys are: at most Config.MaxKeys live
// members (default 1,000). A member not used for Config.Idle (default five
// minutes, on the Config.Clock) is removed; when the group is full, a new
// key takes the place of a member that was not used recently (the CLOCK
// approximation of least recently used). A member that keeps state a
// caller must not lose silently is kept while it holds it: an open or
// half-open breaker is never removed while it refuses calls. When every
// member is so kept, a new key gets the group's shared overflow member
// (Group.Overflow) until room is made. Removals and overflows are counted
// (Group.Stats). No goroutine is started: the group does its housekeeping
// a few members at a time when a new key arrives, and all at once in
// Sweep. Members that hold something to stop (goroutines, connections, as
// redisstore's shared breakers do) are given to the release function of
// NewWithRelease when the group lets them go: removed, or at Group.Close,
// which releases every member and makes the group build no more.
//
// The key travels in the context: WithKey puts it there, hashed once for
// every group the call uses, and KeyFrom reads it (without allocating);
// Group.For is the member of a context's key. Breakers, Budgets and Limiters implement
// retry.Breaker, retry.Budget and retry.Limiter and retry's per-call group
// interfaces (retry.BreakerGroup, retry.BudgetGroup, retry.LimiterGroup):
// retry.Do, retry.Call, httpretry and hedge ask the group once at the start
// of each call for the member of the call's key and use it for every
// attempt of the call, so a retry.Policy whose parts are keyed is an
// ordinary Policy. The empty key (no key in the context) is the default
// member, a member of its own that is never removed. httpretry.WithKey and
// hedge.Transport.Key choose the key of each HTTP request (the scheme, host
// and port by default).
//
// A Group is safe for concurrent use. Looking up a key that has a member,
// or any key once the group is closed, takes no lock and does not
// allocate.
package keyed
