// Package retrytest provides a retry.Observer that records what retry.Do
// did, for tests of code that retries: how many attempts ran, what each
// ended with, which waits were scheduled and why the call ended.
//
//	rec := new(retrytest.Recorder)
//	policy.Observer = rec
//	retry.Do(ctx, policy, op)
//	rec.String() // "start#1 end#1:error retry#2 start#2 end#2:success callend:success"
//
// Combine it with clocktest.Fake to run the waits in virtual time.
package retrytest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/stormguard/stormguard/retry"
)

// Recorder is a retry.Observer that keeps every event it is told, in
// order. It is safe for concurrent use, so one Recorder may observe many
// calls at once. The zero value is ready to use.
type Recorder struct {
	mu      sync.Mutex
	log     []string
	starts  []retry.AttemptStart
	ends    []retry.AttemptEnd
	retries []retry.RetryScheduled
	calls   []retry.CallEnd
}

var _ retry.Observer = (*Recorder)(nil)

// AttemptStart records e and returns ctx unchanged.
func (r *Recorder) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, e)
	r.log = append(r.log, fmt.Sprintf("start#%d", e.Attempt))
	return ctx
}

// AttemptEnd records e.
func (r *Recorder) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, e)
	r.log = append(r.log, fmt.Sprintf("end#%d:%s", e.Attempt, e.Outcome))
}

// RetryScheduled records e.
func (r *Recorder) RetryScheduled(_ context.Context, e retry.RetryScheduled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries = append(r.retries, e)
	r.log = append(r.log, fmt.Sprintf("retry#%d", e.Attempt))
}

// CallEnd records e.
func (r *Recorder) CallEnd(_ context.Context, e retry.CallEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, e)
	r.log = append(r.log, "callend:"+e.Reason.String())
}

// Starts returns the AttemptStart events recorded, oldest first.
func (r *Recorder) Starts() []retry.AttemptStart { return snapshot(r, &r.starts) }

// Ends returns the AttemptEnd events recorded, oldest first.
func (r *Recorder) Ends() []retry.AttemptEnd { return snapshot(r, &r.ends) }

// Retries returns the RetryScheduled events recorded, oldest first.
func (r *Recorder) Retries() []retry.RetryScheduled { return snapshot(r, &r.retries) }

// Calls returns the CallEnd events recorded, oldest first.
func (r *Recorder) Calls() []retry.CallEnd { return snapshot(r, &r.calls) }

// String returns every event recorded, oldest first, as space-separated
// words: start#N and end#N:outcome for attempt N, retry#N when attempt N
// is scheduled (before its wait), and callend:reason.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, " ")
}

// Reset forgets every event recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log, r.starts, r.ends, r.retries, r.calls = nil, nil, nil, nil, nil
}

// snapshot returns a copy of *events, read under r's lock.
func snapshot[E any](r *Recorder, events *[]E) []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]E(nil), *events...)
}
