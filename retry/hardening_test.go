package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// TestZeroAndNilPolicyStopAfterThree: a zero MaxAttempts means
// DefaultMaxAttempts, never "retry forever".
func TestZeroAndNilPolicyStopAfterThree(t *testing.T) {
	if retry.DefaultMaxAttempts != 3 {
		t.Fatalf("DefaultMaxAttempts = %d", retry.DefaultMaxAttempts)
	}
	// A zero Policy through Do, on the fake clock.
	f := clocktest.NewFake()
	op, n := script(errFlaky, errFlaky, errFlaky, errFlaky, errFlaky)
	ch := async(context.Background(), &retry.Policy{Clock: f}, op)
	for range retry.DefaultMaxAttempts - 1 {
		f.BlockUntil(1)
		f.Advance(time.Minute)
	}
	if r := <-ch; !errors.Is(r.err, retry.ErrAttemptsExhausted) || n.Load() != 3 {
		t.Fatalf("zero Policy: %d attempts, err %v; want 3, attempts exhausted", n.Load(), r.err)
	}
	// A nil Policy, step by step (its waits would run on the real clock).
	c := retry.NewCall(context.Background(), nil)
	for i := 1; ; i++ {
		a, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Next(c.End(&a, errFlaky))
		if err != nil {
			if i != 3 || !errors.Is(err, retry.ErrAttemptsExhausted) {
				t.Fatalf("nil Policy stopped after %d attempts with %v; want 3, attempts exhausted", i, err)
			}
			break
		}
		if i == 10 {
			t.Fatal("nil Policy retries without limit")
		}
	}
	// Unlimited is an explicit choice.
	c = retry.NewCall(context.Background(), &retry.Policy{MaxAttempts: retry.Unlimited})
	for range 10 {
		a, _ := c.Begin()
		if _, err := c.Next(c.End(&a, errFlaky)); err != nil {
			t.Fatalf("Unlimited stopped: %v", err)
		}
	}
}

// TestBudgetNotChargedForUnretriedErrors: an error the Policy would not
// retry (here a custom Classify rejects it) must not drain a gRPC-style
// ratio budget, which charges every failure it is told of (D5).
func TestBudgetNotChargedForUnretriedErrors(t *testing.T) {
	errBadRequest := errors.New("400 bad request")
	b := budget.NewRatio(budget.GRPC())
	before := b.Available()
	p := &retry.Policy{Budget: b, Backoff: backoff.Constant{}, Classify: func(err error) bool { return err != errBadRequest }}
	for range 20 {
		for _, observed := range []bool{false, true} { // the inline and the Call paths
			p.Observer = nil
			if observed {
				p.Observer = retry.NopObserver{}
			}
			op, n := script(errBadRequest)
			if _, err := retry.Do(context.Background(), p, op); !errors.Is(err, errBadRequest) || n.Load() != 1 {
				t.Fatalf("calls=%d err=%v", n.Load(), err)
			}
		}
	}
	if after := b.Available(); after != before {
		t.Fatalf("tokens %v → %v: errors the Policy does not retry drained the budget", before, after)
	}
	// What the budget hears is marked Permanent; retried failures are not.
	tb := &recordingBudget{}
	p = &retry.Policy{Budget: tb, MaxAttempts: 2, Backoff: backoff.Constant{}, Classify: func(err error) bool { return err != errBadRequest }}
	op, _ := script(errFlaky, errBadRequest)
	retry.Do(context.Background(), p, op)
	if len(tb.errs) != 2 || retry.IsPermanent(tb.errs[0]) || !retry.IsPermanent(tb.errs[1]) || !errors.Is(tb.errs[1], errBadRequest) {
		t.Fatalf("budget heard %v", tb.errs)
	}
	// Retried failures still cost tokens.
	op, _ = script(errFlaky)
	retry.Do(context.Background(), &retry.Policy{Budget: b, Backoff: backoff.Constant{}}, op)
	if b.Available() >= before {
		t.Fatal("a retried failure did not cost a token")
	}
}

type recordingBudget struct {
	mu   sync.Mutex
	errs []error
}

func (b *recordingBudget) Record(_ bool, err error) {
	if err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}
}
func (b *recordingBudget) Withdraw(error) bool { return true }

// TestAttemptTimeoutRetriedWhateverClassify: an attempt cut by
// AttemptTimeout is retryable even when a custom Classify rejects the
// error it returned, as Policy.AttemptTimeout promises.
func TestAttemptTimeoutRetriedWhateverClassify(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recorder{}
	p := &retry.Policy{Clock: f, AttemptTimeout: time.Second, Backoff: backoff.Constant{Interval: time.Second},
		Classify: func(error) bool { return false }, Observer: rec}
	c := retry.NewCall(context.Background(), p)
	a, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Second)
	<-a.Context.Done() // a hung downstream, cut by the attempt's timer
	err = c.End(&a, a.Context.Err())
	if !errors.Is(err, retry.ErrAttemptTimeout) {
		t.Fatalf("End: %v", err)
	}
	if d, err := c.Next(err); err != nil || d != time.Second {
		t.Fatalf("Next = %v, %v: a timed-out attempt must be retried whatever Classify says", d, err)
	}
	if got := rec.String(); got != "start#1 end#1:timeout retry#2" {
		t.Fatalf("events %q", got)
	}
	// Permanent still wins.
	c = retry.NewCall(context.Background(), p)
	a, _ = c.Begin()
	f.Advance(time.Second)
	<-a.Context.Done()
	if _, err := c.Next(c.End(&a, retry.Permanent(a.Context.Err()))); err == nil {
		t.Fatal("a Permanent error was retried")
	}
}

// TestDeadlineTooClose: a predictive stop says so, while still matching
// context.DeadlineExceeded.
func TestDeadlineTooClose(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(time.Second))
	defer cancel()
	op, _ := script(errFlaky)
	_, err := retry.Do(ctx, &retry.Policy{Clock: f, Backoff: backoff.Constant{Interval: 2 * time.Second}}, op)
	if ctx.Err() != nil {
		t.Fatal("setup: the caller's context ended")
	}
	if !errors.Is(err, retry.ErrDeadlineTooClose) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFlaky) {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "deadline too close") {
		t.Fatalf("message %q does not say the stop was predictive", err.Error())
	}
	// A deadline that has really passed is not predictive.
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = retry.Do(dctx, nil, op)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, retry.ErrDeadlineTooClose) {
		t.Fatalf("expired deadline: %v", err)
	}
}

// TestContextCauseKept: when the caller's context ends with a cause of
// its own, errors.Is finds it in Do's error, and the message names it.
func TestContextCauseKept(t *testing.T) {
	errShutdown := errors.New("shutting down")
	// Cancelled before the first attempt.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShutdown)
	op, _ := script()
	_, err := retry.Do(ctx, nil, op)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("err %v", err)
	}
	// Cancelled during a wait.
	f := clocktest.NewFake()
	ctx, cancel = context.WithCancelCause(context.Background())
	op, _ = script(errFlaky, errFlaky)
	ch := async(ctx, &retry.Policy{Clock: f, Backoff: backoff.Constant{Interval: time.Hour}}, op)
	f.BlockUntil(1)
	cancel(errShutdown)
	if r := <-ch; !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, errShutdown) || !errors.Is(r.err, errFlaky) {
		t.Fatalf("err %v", r.err)
	}
	// A deadline with a cause, ended during an attempt.
	errSLO := errors.New("request SLO spent")
	dctx, dcancel := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), errSLO)
	defer dcancel()
	_, err = retry.Do(dctx, nil, op)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errSLO) {
		t.Fatalf("deadline cause: %v", err)
	}
	// Without a cause of its own there is nothing more to say.
	pctx, pcancel := context.WithCancel(context.Background())
	pcancel()
	_, err = retry.Do(pctx, nil, op)
	var re *retry.Error
	if !errors.As(err, &re) || re.Cause != nil || err.Error() != "context canceled (after 0 attempts)" {
		t.Fatalf("plain cancel: %v (%+v)", err, re)
	}
}

// TestSharedPolicyWithPCG: a Policy (and its Backoff) holding sources
// that are not safe for concurrent use may be shared; -race reported a
// data race here on the start commit.
func TestSharedPolicyWithPCG(t *testing.T) {
	p := &retry.Policy{
		MaxAttempts: 3,
		Clock:       instantClock{}, // no timers: nothing else orders the goroutines
		Backoff:     backoff.Exponential{Base: time.Nanosecond, Max: 2 * time.Nanosecond, Jitter: backoff.Full, Rand: rand.NewPCG(1, 2)},
		Rand:        rand.NewPCG(3, 4),
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				op, _ := script(retry.After(errFlaky, 20*time.Nanosecond), errFlaky)
				retry.Do(context.Background(), p, op)
			}
		}()
	}
	wg.Wait()
}

// TestAdviceBeyondCapStops (D4): advice above MaxRetryAfter stops the call
// instead of coming back at the cap.
func TestAdviceBeyondCapStops(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recorder{}
	op, n := script(retry.After(errFlaky, time.Hour))
	_, err := retry.Do(context.Background(), &retry.Policy{Clock: f, MaxRetryAfter: time.Minute, Observer: rec}, op)
	if n.Load() != 1 || f.Pending() != 0 || !errors.Is(err, retry.ErrAdviceExceedsCap) || !errors.Is(err, errFlaky) {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
	if rec.Calls()[0].Reason != retry.ReasonAdvice {
		t.Fatalf("reason %v", rec.Calls()[0].Reason)
	}
}
