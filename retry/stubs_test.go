package retry_test

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// trackingBudget grants every retry and counts the calls Do makes.
type trackingBudget struct {
	refuse    bool
	records   atomic.Int64
	retries   atomic.Int64
	withdrawn atomic.Int64
	started   atomic.Int64
	refunded  atomic.Int64
}

func (b *trackingBudget) Record(retry bool, err error) {
	b.records.Add(1)
	if retry {
		b.retries.Add(1)
	}
}

func (b *trackingBudget) Withdraw(error) bool {
	if b.refuse {
		return false
	}
	b.withdrawn.Add(1)
	return true
}
func (b *trackingBudget) Start(bool) { b.started.Add(1) }
func (b *trackingBudget) Refund()    { b.refunded.Add(1) }

// stubBreaker refuses with err when set; it counts admissions and results.
type stubBreaker struct {
	mu       sync.Mutex
	allowErr error
	readyErr error
	openAt   int // refuse Allow from this admission on (0: never)
	allowed  int
	results  []error
}

func (b *stubBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.allowErr != nil && (b.openAt == 0 || b.allowed+1 >= b.openAt) {
		return nil, b.allowErr
	}
	b.allowed++
	return func(err error) {
		b.mu.Lock()
		b.results = append(b.results, err)
		b.mu.Unlock()
	}, nil
}

func (b *stubBreaker) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.readyErr
}

// recorder is a retrytest.Recorder that also checks that AttemptEnd gets
// the context AttemptStart returned.
type recorder struct{ retrytest.Recorder }

type ctxKey struct{}

func (r *recorder) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	return context.WithValue(r.Recorder.AttemptStart(ctx, e), ctxKey{}, e.Attempt)
}

func (r *recorder) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	if ctx.Value(ctxKey{}) != e.Attempt {
		panic("AttemptEnd did not get AttemptStart's context")
	}
	r.Recorder.AttemptEnd(ctx, e)
}
