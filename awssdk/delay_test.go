package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// errFlaky is one error value every failed attempt returns, as a
// middleware or a fake transport returning a sentinel does.
var errFlaky = errors.New("flaky")

// sentinelErrors turns every failed response into errFlaky.
type sentinelErrors struct{}

func (sentinelErrors) ID() string { return "test.SentinelErrors" }

func (sentinelErrors) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	out middleware.DeserializeOutput, md middleware.Metadata, err error,
) {
	out, md, err = next.HandleDeserialize(ctx, in)
	if err != nil {
		err = errFlaky
	}
	return out, md, err
}

// pauseFirstDelay wraps a retryer: the first RetryDelay waits for resume
// before it asks the retryer, as a goroutine the scheduler parks between
// the SDK's GetRetryToken and RetryDelay does.
type pauseFirstDelay struct {
	aws.RetryerV2
	first          atomic.Bool
	paused, resume chan struct{}
}

func (p *pauseFirstDelay) RetryDelay(attempt int, err error) (time.Duration, error) {
	if p.first.CompareAndSwap(false, true) {
		close(p.paused)
		<-p.resume
	}
	return p.RetryerV2.RetryDelay(attempt, err)
}

type callKey struct{}

// scheduled records each RetryScheduled with the call its context names.
type scheduled struct {
	mu sync.Mutex
	b  strings.Builder
}

func (*scheduled) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	return ctx
}
func (*scheduled) AttemptEnd(context.Context, retry.AttemptEnd) {}
func (*scheduled) CallEnd(context.Context, retry.CallEnd)       {}
func (s *scheduled) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&s.b, "%v: retry %d after %v; ", ctx.Value(callKey{}), e.Attempt, e.Delay)
}

func (s *scheduled) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestConcurrentSameErrorKeepsEachWait (s4 aws 1): two operations on one
// Retryer fail with the same error value; call A is parked between the
// SDK's GetRetryToken and RetryDelay while call B retries twice. Each must
// get the wait computed for its own retry (1 µs before retry 2, 2 µs before
// retry 3) and its own context: the shared ring keyed by the error value
// handed B A's wait and context, and A B's.
func TestConcurrentSameErrorKeepsEachWait(t *testing.T) {
	e := newEndpoint(t)
	obs := &scheduled{}
	policy := &retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Func(func(n int, _ time.Duration) time.Duration { return time.Duration(n) * time.Microsecond }),
		Classify:    func(err error) bool { return errors.Is(err, errFlaky) },
		Observer:    obs,
	}
	r := awssdk.NewRetryer(policy)
	gate := &pauseFirstDelay{RetryerV2: r, paused: make(chan struct{}), resume: make(chan struct{})}
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return gate }),
		config.WithAPIOptions([]func(*middleware.Stack) error{
			r.AddMiddleware,
			func(s *middleware.Stack) error { return s.Deserialize.Add(sentinelErrors{}, middleware.Before) },
		}))
	e.mu.Lock()
	for range 6 {
		e.script = append(e.script, internal)
	}
	e.mu.Unlock()

	done := make(chan error)
	go func() { done <- getItemCtx(context.WithValue(context.Background(), callKey{}, "A"), c) }()
	select {
	case <-gate.paused:
	case err := <-done:
		t.Fatalf("call A ended (%v) without a retry", err)
	}
	errB := getItemCtx(context.WithValue(context.Background(), callKey{}, "B"), c)
	close(gate.resume)
	errA := <-done
	for _, err := range []error{errA, errB} {
		if !errors.Is(err, errFlaky) {
			t.Errorf("error %v, want errFlaky", err)
		}
	}
	want := "B: retry 2 after 1µs; B: retry 3 after 2µs; A: retry 2 after 1µs; A: retry 3 after 2µs; "
	if got := obs.String(); got != want {
		t.Errorf("scheduled:\n got %s\nwant %s", got, want)
	}
}
