package throttle

import "context"

// Acquire is Allow as the retry package's Limiter (retry.Policy.Limiter):
// every attempt, first or retry, is counted and may be rejected. ctx is
// not read: the decision does not wait.
func (t *SRE) Acquire(_ context.Context, _ bool) (done func(err error), err error) {
	return t.Allow()
}
