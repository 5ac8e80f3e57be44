package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errFlaky = errors.New("flaky")

// script returns an op that fails with errs[i] on attempt i+1 and then
// succeeds with the attempt number, and a counter of calls.
func script(errs ...error) (func(context.Context) (int, error), *atomic.Int32) {
	var n atomic.Int32
	return func(context.Context) (int, error) {
		i := int(n.Add(1))
		if i <= len(errs) {
			return -i, errs[i-1]
		}
		return i, nil
	}, &n
}

// async runs Do in a goroutine on the fake clock.
func async[T any](ctx context.Context, p *retry.Policy, op func(context.Context) (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := retry.Do(ctx, p, op)
		ch <- result[T]{v, err}
	}()
	return ch
}

type result[T any] struct {
	v   T
	err error
}

// waitFor blocks until the call under test waits on the fake clock, checks
// the wait is want, and advances past it.
func waitFor(t *testing.T, f *clocktest.Fake, want time.Duration) {
	t.Helper()
	f.BlockUntil(1)
	if d := f.Deadlines(); len(d) != 1 || d[0] != want {
		t.Fatalf("pending waits %v, want [%v]", d, want)
	}
	f.Advance(want)
}

func TestSucceedsFirstTry(t *testing.T) {
	f := clocktest.NewFake()
	op, n := script()
	v, err := retry.Do(context.Background(), &retry.Policy{Clock: f}, op)
	if err != nil || v != 1 || n.Load() != 1 || f.Pending() != 0 {
		t.Fatalf("v=%d err=%v calls=%d", v, err, n.Load())
	}
}

func TestRetriesWithBackoffSchedule(t *testing.T) {
	f := clocktest.NewFake()
	p := &retry.Policy{Clock: f, MaxAttempts: 4, Backoff: backoff.Exponential{Base: time.Second, Max: 3 * time.Second}}
	op, n := script(errFlaky, errFlaky, errFlaky)
	ch := async(context.Background(), p, op)
	waitFor(t, f, time.Second)
	waitFor(t, f, 2*time.Second)
	waitFor(t, f, 3*time.Second)
	r := <-ch
	if r.err != nil || r.v != 4 || n.Load() != 4 {
		t.Fatalf("v=%d err=%v calls=%d", r.v, r.err, n.Load())
	}
}

func TestAttemptsExhausted(t *testing.T) {
	op, n := script(errFlaky, errFlaky, errFlaky, errFlaky)
	v, err := retry.Do(context.Background(), &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}}, op)
	if n.Load() != 3 {
		t.Fatalf("calls = %d", n.Load())
	}
	if !errors.Is(err, retry.ErrAttemptsExhausted) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || re.Last != errFlaky {
		t.Fatalf("Error = %+v", re)
	}
	if v != -3 {
		t.Fatalf("last value %d, want the third attempt's -3", v)
	}
	if err.Error() != "retry: attempts exhausted after 3 attempts: flaky" {
		t.Fatalf("message %q", err.Error())
	}
	for _, s := range []error{retry.ErrBudgetExhausted, context.Canceled, context.DeadlineExceeded, retry.ErrElapsed} {
		if errors.Is(err, s) {
			t.Fatalf("err also matches %v", s)
		}
	}
}

func TestPermanentStopsAtOnce(t *testing.T) {
	base := errors.New("bad request")
	op, n := script(retry.Permanent(base), errFlaky)
	_, err := retry.Do(context.Background(), &retry.Policy{Backoff: backoff.Constant{}}, op)
	if n.Load() != 1 || !errors.Is(err, base) || !retry.IsPermanent(err) || errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
	if err.Error() != "bad request" {
		t.Fatalf("message %q", err.Error())
	}
	if retry.Permanent(nil) != nil || retry.After(nil, time.Second) != nil {
		t.Fatal("markers of nil must be nil")
	}
}

func TestClassify(t *testing.T) {
	fatal := errors.New("fatal")
	p := &retry.Policy{Backoff: backoff.Constant{}, Classify: func(err error) bool { return err != fatal }}
	op, n := script(errFlaky, fatal, errFlaky)
	_, err := retry.Do(context.Background(), p, op)
	if n.Load() != 2 || !errors.Is(err, fatal) {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
	// Permanent wins over a Classify that says yes.
	p.Classify = func(error) bool { return true }
	op, n = script(retry.Permanent(errFlaky))
	retry.Do(context.Background(), p, op)
	if n.Load() != 1 {
		t.Fatalf("permanent retried: %d calls", n.Load())
	}
}

func TestDefaultClassifier(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errFlaky, true},
		{retry.Permanent(errFlaky), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{&netTimeout{}, true},
	} {
		if got := retry.DefaultClassifier(tc.err); got != tc.want {
			t.Errorf("DefaultClassifier(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type netTimeout struct{}

func (*netTimeout) Error() string   { return "i/o timeout" }
func (*netTimeout) Timeout() bool   { return true }
func (*netTimeout) Temporary() bool { return false }

func TestContextCancelledBeforeFirstAttempt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op, n := script()
	_, err := retry.Do(ctx, nil, op)
	var re *retry.Error
	if n.Load() != 0 || !errors.Is(err, context.Canceled) || !errors.As(err, &re) || re.Attempts != 0 {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
}

func TestContextCancelledDuringWait(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := context.WithCancel(context.Background())
	tb := &trackingBudget{}
	p := &retry.Policy{Clock: f, Backoff: backoff.Constant{Interval: time.Hour}, Budget: tb}
	op, n := script(errFlaky, errFlaky)
	ch := async(ctx, p, op)
	f.BlockUntil(1)
	cancel()
	r := <-ch
	if n.Load() != 1 || !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, errFlaky) {
		t.Fatalf("calls=%d err=%v", n.Load(), r.err)
	}
	if f.Pending() != 0 {
		t.Fatal("wait timer not stopped")
	}
	if tb.withdrawn.Load() != 1 || tb.refunded.Load() != 1 {
		t.Fatalf("withdrawn %d refunded %d: an abandoned retry must be refunded", tb.withdrawn.Load(), tb.refunded.Load())
	}
}

func TestCallerCancelDuringAttemptIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	rec := &recorder{}
	_, err := retry.Do(ctx, &retry.Policy{Backoff: backoff.Constant{}, Observer: rec}, func(ctx context.Context) (int, error) {
		calls.Add(1)
		cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if calls.Load() != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls=%d err=%v", calls.Load(), err)
	}
	if got := rec.String(); got != "start#1 end#1:canceled callend:context" {
		t.Fatalf("events %q", got)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recorder{}
	p := &retry.Policy{Clock: f, AttemptTimeout: 2 * time.Second, Backoff: backoff.Constant{Interval: time.Second}, Observer: rec}
	var calls atomic.Int32
	start := f.Now() // the test may advance the clock before the attempt looks
	ch := async(context.Background(), p, func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			if dl, ok := ctx.Deadline(); !ok || !dl.Equal(start.Add(2*time.Second)) {
				return "", retry.Permanent(fmt.Errorf("attempt deadline %v", dl))
			}
			<-ctx.Done() // a hung downstream
			return "", ctx.Err()
		}
		return "ok", nil
	})
	waitFor(t, f, 2*time.Second) // the attempt timeout
	waitFor(t, f, time.Second)   // the backoff
	r := <-ch
	if r.err != nil || r.v != "ok" || calls.Load() != 2 {
		t.Fatalf("v=%q err=%v calls=%d", r.v, r.err, calls.Load())
	}
	if got := rec.String(); got != "start#1 end#1:timeout retry#2 start#2 end#2:success callend:success" {
		t.Fatalf("events %q", got)
	}
	if !errors.Is(rec.Ends()[0].Err, retry.ErrAttemptTimeout) || !errors.Is(rec.Ends()[0].Err, context.DeadlineExceeded) {
		t.Fatalf("attempt error %v", rec.Ends()[0].Err)
	}
}

func TestAdapterTimeoutOutcome(t *testing.T) {
	rec := &recorder{}
	op, _ := script(fmt.Errorf("http: %w", retry.ErrAttemptTimeout))
	retry.Do(context.Background(), &retry.Policy{Backoff: backoff.Constant{}, Observer: rec}, op)
	if got := rec.String(); got != "start#1 end#1:timeout retry#2 start#2 end#2:success callend:success" {
		t.Fatalf("events %q", got)
	}
}

func TestAdviceJitterSpreadsClients(t *testing.T) {
	seen := map[time.Duration]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		f := clocktest.NewFake()
		op, _ := script(retry.After(errFlaky, 20*time.Second))
		ch := async(context.Background(), &retry.Policy{Clock: f, Backoff: backoff.Constant{}, Rand: backoff.NewSource(seed)}, op)
		f.BlockUntil(1)
		seen[f.Deadlines()[0]] = true
		f.Advance(time.Minute)
		<-ch
	}
	if len(seen) < 15 {
		t.Fatalf("20 clients told Retry-After: 20 chose only %d distinct waits", len(seen))
	}
}

// expiringCtx is a caller's context whose deadline passes when expire is
// called, so that a test decides when it happens rather than a real timer
// racing a loaded machine.
type expiringCtx struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newExpiringCtx() *expiringCtx {
	return &expiringCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringCtx) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *expiringCtx) Done() <-chan struct{}       { return c.done }
func (c *expiringCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestCallerDeadlineIsNotRetried(t *testing.T) {
	ctx := newExpiringCtx()
	var calls atomic.Int32
	_, err := retry.Do(ctx, &retry.Policy{AttemptTimeout: time.Hour, Backoff: backoff.Constant{}}, func(actx context.Context) (int, error) {
		calls.Add(1)
		ctx.expire() // the caller's deadline passes during the attempt
		<-actx.Done()
		return 0, actx.Err()
	})
	if calls.Load() != 1 || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, retry.ErrAttemptTimeout) {
		t.Fatalf("calls=%d err=%v", calls.Load(), err)
	}
}

func TestDeadlineAwareStop(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(1500*time.Millisecond))
	defer cancel()
	rec := &recorder{}
	tb := &trackingBudget{}
	p := &retry.Policy{Clock: f, Backoff: backoff.Constant{Interval: 2 * time.Second}, Observer: rec, Budget: tb}
	op, n := script(errFlaky, errFlaky)
	_, err := retry.Do(ctx, p, op)
	if n.Load() != 1 || f.Pending() != 0 {
		t.Fatalf("calls=%d pending=%d: should stop without waiting", n.Load(), f.Pending())
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFlaky) || tb.withdrawn.Load() != 0 {
		t.Fatalf("err=%v withdrawn=%d", err, tb.withdrawn.Load())
	}
	if rec.Calls()[0].Reason != retry.ReasonDeadline {
		t.Fatalf("reason %v", rec.Calls()[0].Reason)
	}

	// A wait that fits is taken, unless MinAttemptTime does not fit after it.
	p.Backoff = backoff.Constant{Interval: time.Second}
	p.MinAttemptTime = 600 * time.Millisecond
	op, n = script(errFlaky)
	if _, err := retry.Do(ctx, p, op); n.Load() != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MinAttemptTime: calls=%d err=%v", n.Load(), err)
	}
	p.MinAttemptTime = 400 * time.Millisecond
	op, n = script(errFlaky)
	ch := async(ctx, p, op)
	waitFor(t, f, time.Second)
	if r := <-ch; r.err != nil || n.Load() != 2 {
		t.Fatalf("fitting wait: calls=%d err=%v", n.Load(), r.err)
	}
}

func TestMaxElapsed(t *testing.T) {
	f := clocktest.NewFake()
	p := &retry.Policy{Clock: f, MaxAttempts: retry.Unlimited, Backoff: backoff.Constant{Interval: time.Second}, MaxElapsed: 2500 * time.Millisecond}
	op, n := script(errFlaky, errFlaky, errFlaky, errFlaky)
	ch := async(context.Background(), p, op)
	waitFor(t, f, time.Second)
	waitFor(t, f, time.Second)
	r := <-ch // a third wait would end at 3s > 2.5s
	if n.Load() != 3 || !errors.Is(r.err, retry.ErrElapsed) || !errors.Is(r.err, errFlaky) {
		t.Fatalf("calls=%d err=%v", n.Load(), r.err)
	}
}

func TestRetryAfterAdvice(t *testing.T) {
	for _, tc := range []struct {
		name          string
		advice        time.Duration
		backoff       time.Duration
		maxRetryAfter time.Duration
		lo, hi        time.Duration
	}{
		{"advice above backoff", 2 * time.Second, 100 * time.Millisecond, 0, 2 * time.Second, 2200 * time.Millisecond},
		{"just under the cap, jittered up to it", 4900 * time.Millisecond, 100 * time.Millisecond, 5 * time.Second, 4900 * time.Millisecond, 5 * time.Second},
		{"default cap 30s", 30 * time.Second, 0, 0, 30 * time.Second, 30 * time.Second},
		{"backoff above advice", time.Second, 3 * time.Second, 0, 3 * time.Second, 3 * time.Second},
		{"jitter never passes the cap", 9900 * time.Millisecond, 0, 10 * time.Second, 9900 * time.Millisecond, 10 * time.Second},
		{"ignored when MaxRetryAfter < 0", time.Hour, 250 * time.Millisecond, -1, 250 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(0); seed < 20; seed++ {
				f := clocktest.NewFake()
				p := &retry.Policy{Clock: f, Backoff: backoff.Constant{Interval: tc.backoff}, MaxRetryAfter: tc.maxRetryAfter, Rand: backoff.NewSource(seed)}
				op, _ := script(retry.After(errFlaky, tc.advice))
				ch := async(context.Background(), p, op)
				f.BlockUntil(1)
				d := f.Deadlines()[0]
				if d < tc.lo || d > tc.hi {
					t.Fatalf("wait %v outside [%v, %v]", d, tc.lo, tc.hi)
				}
				f.Advance(d)
				if r := <-ch; r.err != nil {
					t.Fatal(r.err)
				}
			}
		})
	}
}

func TestRetryAfterCannotFitDeadline(t *testing.T) {
	f := clocktest.NewFake()
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(5*time.Second))
	defer cancel()
	op, n := script(retry.After(errFlaky, 10*time.Second))
	_, err := retry.Do(ctx, &retry.Policy{Clock: f, Backoff: backoff.Constant{}}, op)
	if n.Load() != 1 || f.Pending() != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
	if d, ok := retry.RetryAfter(err); !ok || d != 10*time.Second {
		t.Fatalf("RetryAfter(err) = %v %v", d, ok)
	}
}

func TestRunAndNilPolicy(t *testing.T) {
	calls := 0
	err := retry.Run(context.Background(), &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}}, func(context.Context) error {
		calls++
		return errFlaky
	})
	if calls != 2 || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
	if err := retry.Run(context.Background(), nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestSharedPolicyConcurrent(t *testing.T) {
	tb := &trackingBudget{}
	rec := &recorder{}
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Exponential{Base: time.Microsecond, Max: 10 * time.Microsecond, Jitter: backoff.Full}, Budget: tb, Observer: rec}
	var wg sync.WaitGroup
	var attempts atomic.Int64
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				retry.Run(context.Background(), p, func(context.Context) error {
					if attempts.Add(1)%2 == 0 {
						return nil
					}
					return errFlaky
				})
			}
		}()
	}
	wg.Wait()
	if got := tb.records.Load(); got != attempts.Load() {
		t.Fatalf("budget saw %d attempts, ran %d", got, attempts.Load())
	}
	if len(rec.Calls()) != 1000 {
		t.Fatalf("CallEnd events %d, want 1000", len(rec.Calls()))
	}
}
