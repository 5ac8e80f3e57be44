package grpcretry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Test doubles for the Policy's collaborators, and helpers that drive a
// call against the fake clock.

// recorder is a retrytest.Recorder that also hands each CallEnd to
// callEnded, for tests whose call ends in the background.
type recorder struct {
	retrytest.Recorder
	callEnded chan retry.CallEnd // buffered
}

func newRecorder() *recorder { return &recorder{callEnded: make(chan retry.CallEnd, 16)} }

func (r *recorder) CallEnd(ctx context.Context, e retry.CallEnd) {
	r.Recorder.CallEnd(ctx, e)
	r.callEnded <- e
}

// codes returns the status code of every finished attempt, in order.
func (r *recorder) codes() []codes.Code {
	ends := r.Ends()
	out := make([]codes.Code, len(ends))
	for i, e := range ends {
		out[i] = status.Code(e.Err)
	}
	return out
}

func (r *recorder) outcomes() []retry.Outcome {
	ends := r.Ends()
	out := make([]retry.Outcome, len(ends))
	for i, e := range ends {
		out[i] = e.Outcome
	}
	return out
}

func (r *recorder) lastCall(t testing.TB) retry.CallEnd {
	t.Helper()
	calls := r.Calls()
	if len(calls) != 1 {
		t.Fatalf("CallEnd events: %+v, want exactly one", calls)
	}
	return calls[0]
}

// countingBreaker is a retry.Breaker that admits everything until told
// otherwise and counts permits and results.
type countingBreaker struct {
	mu      sync.Mutex
	refuse  error // Allow and Ready return it when set
	allowed int
	results []error
}

var errTestOpen = errors.New("breaker: open (test)")

func (b *countingBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse != nil {
		return nil, b.refuse
	}
	b.allowed++
	return func(err error) {
		b.mu.Lock()
		b.results = append(b.results, err)
		b.mu.Unlock()
	}, nil
}

func (b *countingBreaker) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuse
}

func (b *countingBreaker) counts() (allowed, done int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowed, len(b.results)
}

// limitBudget grants a fixed number of retries and records every call.
type limitBudget struct {
	mu       sync.Mutex
	left     int
	records  []bool // the retry flag of each Record
	withdraw int
}

func (b *limitBudget) Record(retry bool, _ error) {
	b.mu.Lock()
	b.records = append(b.records, retry)
	b.mu.Unlock()
}

func (b *limitBudget) Withdraw(error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withdraw++
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

// within fails the test if fn has not returned after a generous real-time
// bound: a watchdog for calls that must not wait, never a timing assertion.
func within(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("call did not return: it is waiting when it must not")
	}
}

// driveWaits runs call in a goroutine while the test plays the clock: for
// each expected wait it waits until the call sleeps on f, checks the wait
// (check may be nil) and advances f by it. It returns call's error.
func driveWaits(t *testing.T, f *clocktest.Fake, call func() error, check func(i int, d time.Duration), waits int) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	for i := 0; i < waits; i++ {
		f.BlockUntil(1)
		d := f.Deadlines()[0]
		if check != nil {
			check(i, d)
		}
		f.Advance(d)
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("call did not return after the expected waits")
		return nil
	}
}
