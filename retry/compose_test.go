package retry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

var errOpen = errors.New("breaker: open")

func TestBudgetRecordsEveryAttempt(t *testing.T) {
	tb := &trackingBudget{}
	op, _ := script(errFlaky, errFlaky)
	if _, err := retry.Do(context.Background(), &retry.Policy{Budget: tb, Backoff: backoff.Constant{}}, op); err != nil {
		t.Fatal(err)
	}
	if tb.records.Load() != 3 || tb.retries.Load() != 2 || tb.withdrawn.Load() != 2 || tb.started.Load() != 3 || tb.refunded.Load() != 0 {
		t.Fatalf("records=%d retries=%d withdrawn=%d started=%d refunded=%d",
			tb.records.Load(), tb.retries.Load(), tb.withdrawn.Load(), tb.started.Load(), tb.refunded.Load())
	}
}

func TestBudgetRefusalStopsAtOnce(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recorder{}
	tb := &trackingBudget{refuse: true}
	op, n := script(errFlaky, errFlaky)
	_, err := retry.Do(context.Background(), &retry.Policy{Clock: f, Budget: tb, Observer: rec, Backoff: backoff.Constant{Interval: time.Second}}, op)
	if n.Load() != 1 || f.Pending() != 0 {
		t.Fatalf("calls=%d pending=%d", n.Load(), f.Pending())
	}
	if !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, errFlaky) || errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("err = %v", err)
	}
	if got := rec.String(); got != "start#1 end#1:error callend:budget" {
		t.Fatalf("events %q", got)
	}
}

func TestBreakerOpenBeforeFirstAttempt(t *testing.T) {
	br := &stubBreaker{allowErr: errOpen}
	op, n := script()
	_, err := retry.Do(context.Background(), &retry.Policy{Breaker: br}, op)
	var re *retry.Error
	if n.Load() != 0 || !errors.Is(err, errOpen) || !errors.As(err, &re) || re.Last != nil {
		t.Fatalf("calls=%d err=%v", n.Load(), err)
	}
}

func TestBreakerSeesEveryResult(t *testing.T) {
	br := &stubBreaker{}
	op, _ := script(errFlaky, errFlaky)
	retry.Do(context.Background(), &retry.Policy{Breaker: br, Backoff: backoff.Constant{}}, op)
	if len(br.results) != 3 || br.results[0] != errFlaky || br.results[2] != nil {
		t.Fatalf("results %v", br.results)
	}
}

func TestBreakerOpenDuringRetriesNoWaitNoBudget(t *testing.T) {
	f := clocktest.NewFake()
	tb := &trackingBudget{}
	br := &stubBreaker{readyErr: errOpen}
	op, n := script(errFlaky, errFlaky)
	_, err := retry.Do(context.Background(), &retry.Policy{Clock: f, Budget: tb, Breaker: br, Backoff: backoff.Constant{Interval: time.Second}}, op)
	if n.Load() != 1 || f.Pending() != 0 || tb.withdrawn.Load() != 0 {
		t.Fatalf("calls=%d pending=%d withdrawn=%d", n.Load(), f.Pending(), tb.withdrawn.Load())
	}
	if !errors.Is(err, errOpen) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v", err)
	}
}

func TestBreakerOpensDuringWaitRefundsBudget(t *testing.T) {
	tb := &trackingBudget{}
	br := &stubBreaker{allowErr: errOpen, openAt: 2}
	op, n := script(errFlaky, errFlaky)
	_, err := retry.Do(context.Background(), &retry.Policy{Budget: tb, Breaker: br, Backoff: backoff.Constant{}}, op)
	if n.Load() != 1 || !errors.Is(err, errOpen) || tb.withdrawn.Load() != 1 || tb.refunded.Load() != 1 {
		t.Fatalf("calls=%d err=%v withdrawn=%d refunded=%d", n.Load(), err, tb.withdrawn.Load(), tb.refunded.Load())
	}
}

func TestObserverEvents(t *testing.T) {
	f := clocktest.NewFake()
	rec := &recorder{}
	p := &retry.Policy{Operation: "get-user", Clock: f, Observer: rec, MaxAttempts: 3,
		Backoff: backoff.Constant{Interval: time.Second}}
	op, _ := script(errFlaky, retry.After(errFlaky, 5*time.Second), errFlaky)
	ch := async(context.Background(), p, op)
	waitFor(t, f, time.Second)
	f.BlockUntil(1)
	f.Advance(f.Deadlines()[0])
	<-ch
	if got := rec.String(); got != "start#1 end#1:error retry#2 start#2 end#2:error retry#3 start#3 end#3:error callend:attempts" {
		t.Fatalf("events %q", got)
	}
	if d := rec.Retries()[0]; d.Delay != time.Second || d.Advised || d.Operation != "get-user" {
		t.Fatalf("first retry %+v", d)
	}
	if d := rec.Retries()[1]; d.Delay < 5*time.Second || !d.Advised {
		t.Fatalf("second retry %+v", d)
	}
	c := rec.Calls()[0]
	if c.Attempts != 3 || c.Reason != retry.ReasonAttempts || c.Duration < 6*time.Second || c.Operation != "get-user" {
		t.Fatalf("call end %+v", c)
	}
}

func TestMulti(t *testing.T) {
	if retry.Multi() != nil || retry.Multi(nil, nil) != nil {
		t.Fatal("Multi of nothing must be nil")
	}
	a := &recorder{}
	if retry.Multi(nil, a) != retry.Observer(a) {
		t.Fatal("Multi of one returns it")
	}
	b := &recorder{}
	op, _ := script(errFlaky)
	retry.Do(context.Background(), &retry.Policy{Observer: retry.Multi(a, retry.NopObserver{}, b), Backoff: backoff.Constant{}}, op)
	if a.String() != b.String() || a.String() != "start#1 end#1:error retry#2 start#2 end#2:success callend:success" {
		t.Fatalf("a=%q b=%q", a, b)
	}
}

func TestSlogObserver(t *testing.T) {
	if retry.NewSlogObserver(nil) != nil {
		t.Fatal("nil logger must give nil observer")
	}
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	op, _ := script(errFlaky, errFlaky)
	retry.Do(context.Background(), &retry.Policy{Operation: "op", MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: retry.NewSlogObserver(l)}, op)
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="retry: attempt failed" operation=op attempt=1 outcome=error`,
		`level=DEBUG msg="retry: retrying" operation=op attempt=2 delay=0s advised=false error=flaky`,
		`level=WARN msg="retry: gave up" operation=op attempts=2 reason=attempts`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestOutcomeAndReasonNames(t *testing.T) {
	if retry.OutcomeTimeout.String() != "timeout" || retry.Outcome(99).String() != "unknown" {
		t.Fatal("Outcome names")
	}
	if retry.ReasonBudget.String() != "budget" || retry.Reason(99).String() != "unknown" {
		t.Fatal("Reason names")
	}
}
