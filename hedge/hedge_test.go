package hedge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

func policy(clk *clocktest.Fake, obs retry.Observer) *retry.Policy {
	return &retry.Policy{
		Operation:   "op",
		MaxAttempts: 5,
		Backoff:     backoff.Constant{Interval: time.Second},
		Clock:       clk,
		Observer:    obs,
	}
}

// A hedge starts exactly at the delay, the first answer wins, and the
// loser's context is cancelled and its value released.
func TestHedgeStartsAtDelayAndFirstWins(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond, MaxHedges: 2}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10*time.Millisecond - time.Nanosecond)
	s.noStart(t)
	if got := ev.String(); got != "[start#1]" {
		t.Fatalf("before the delay: %s", got)
	}
	clk.Advance(time.Nanosecond)
	s.wait(t, 2) // exactly at the delay
	if got := ev.String(); got != "[start#1 start#2 hedge#2]" {
		t.Fatalf("at the delay: %s", got)
	}
	s.answer(2, "v2", nil)
	r := get(t, out)
	if r.err != nil || r.v != "v2" {
		t.Fatalf("Do = %q, %v; want v2, nil", r.v, r.err)
	}
	if err := s.ctx(1).Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("loser's context: %v", err)
	}
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1-cancelled"}) {
		t.Fatalf("released %q", got)
	}
	want := "[start#1 start#2 hedge#2 end#2:success won#2 end#1:canceled cancelled#1 callend:success/2]"
	if got := ev.String(); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left", clk.Pending())
	}
}

// An answer before the delay starts no hedge and leaves no timer.
func TestAnswerBeforeDelay(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	v, err := hedge.Do(context.Background(), h, func(context.Context) (int, error) { return 7, nil }, nil)
	if v != 7 || err != nil {
		t.Fatalf("Do = %d, %v", v, err)
	}
	if got, want := ev.String(), "[start#1 end#1:success callend:success/1]"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left", clk.Pending())
	}
}

// A refusing budget stops new hedges, not the running ones.
func TestBudgetRefusalStopsNewHedgesOnly(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	b := &countingBudget{grant: 1}
	p := policy(clk, ev)
	p.Budget = b
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 3}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	clk.Advance(10 * time.Millisecond) // the budget refuses hedge 3
	s.noStart(t)
	clk.Advance(time.Hour)
	s.noStart(t)
	if err := s.ctx(1).Err(); err != nil {
		t.Fatalf("attempt 1 stopped: %v", err)
	}
	if err := s.ctx(2).Err(); err != nil {
		t.Fatalf("attempt 2 stopped: %v", err)
	}
	s.answer(1, "v1", nil)
	r := get(t, out)
	if r.v != "v1" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	want := "[start#1 start#2 hedge#2 refused:budget end#1:success end#2:canceled cancelled#2 callend:success/2]"
	if got := ev.String(); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	b.check(t, 2, 1)
}

// countingBudget grants the first grant withdrawals and follows attempts.
type countingBudget struct {
	grant, withdrawals, starts, records, refunds int
	errs                                         []error
}

func (b *countingBudget) Record(retry bool, err error) { b.records++ }
func (b *countingBudget) Withdraw(err error) bool {
	b.withdrawals++
	b.errs = append(b.errs, err)
	return b.withdrawals <= b.grant
}
func (b *countingBudget) Start(bool) { b.starts++ }
func (b *countingBudget) Refund()    { b.refunds++ }

func (b *countingBudget) check(t *testing.T, attempts, granted int) {
	t.Helper()
	if b.starts != attempts || b.records != attempts {
		t.Fatalf("budget: %d starts, %d records; want %d each", b.starts, b.records, attempts)
	}
	if b.refunds != 0 {
		t.Fatalf("budget: %d refunds", b.refunds)
	}
	if len(b.errs) > 0 && !errors.Is(b.errs[0], hedge.ErrHedge) {
		t.Fatalf("budget heard %v for a hedge", b.errs[0])
	}
}

// MaxAttempts bounds hedges and retries together.
func TestMaxAttemptsBoundsHedgesAndRetries(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := policy(clk, ev)
	p.MaxAttempts = 3
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 5}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", errors.New("boom"))
	s.answer(2, "v2", errors.New("boom"))
	// Both failed: a retry after the backoff, the third and last attempt.
	ev.waitFor(t, "retry#3")
	clk.BlockUntil(1)
	clk.Advance(time.Second)
	s.wait(t, 3)
	clk.Advance(time.Hour) // no hedge: the limit is reached
	s.noStart(t)
	s.answer(3, "v3", errors.New("boom"))
	r := get(t, out)
	if !errors.Is(r.err, retry.ErrAttemptsExhausted) || r.v != "v3" {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	var re *retry.Error
	if !errors.As(r.err, &re) || re.Attempts != 3 {
		t.Fatalf("error %#v", r.err)
	}
	got := s.releasedValues()
	slices.Sort(got)
	if !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("released %q", got)
	}
}

// A fatal result stops everything at once.
func TestFatalStopsAll(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	fatal := errors.New("bad request")
	s.answer(2, "v2", retry.Permanent(fatal))
	r := get(t, out)
	if !errors.Is(r.err, fatal) || r.v != "v2" {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	var re *retry.Error
	if !errors.As(r.err, &re) || !errors.Is(re.Last, fatal) {
		t.Fatalf("Last = %v", re.Last)
	}
	if !errors.Is(s.ctx(1).Err(), context.Canceled) {
		t.Fatal("attempt 1 not cancelled")
	}
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1-cancelled"}) {
		t.Fatalf("released %q", got)
	}
}

// The breaker is asked for every attempt, hedges included.
func TestBreakerSeesEveryAttempt(t *testing.T) {
	clk := clocktest.NewFake()
	br := &countingBreaker{}
	p := policy(clk, nil)
	p.Breaker = br
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 2}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	clk.BlockUntil(1) // the third copy's timer, set when the second was sent
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 3)
	s.answer(3, "v3", nil)
	if r := get(t, out); r.v != "v3" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if br.allows != 3 || br.dones != 3 {
		t.Fatalf("breaker: %d allows, %d dones", br.allows, br.dones)
	}
}

type countingBreaker struct{ allows, dones int }

func (b *countingBreaker) Allow() (func(error), error) {
	b.allows++
	return func(error) { b.dones++ }, nil
}
func (b *countingBreaker) Ready() error { return nil }

// The concurrency budget's counts balance after a hedged call.
func TestConcurrencyBudgetBalances(t *testing.T) {
	clk := clocktest.NewFake()
	cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
	p := policy(clk, nil)
	p.Budget = cb
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", nil)
	if r := get(t, out); r.v != "v1" {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if req, ret := cb.Active(); req != 0 || ret != 0 {
		t.Fatalf("active after the call: %d requests, %d retries", req, ret)
	}
}

// Under the layer rule's default, a call whose inbound caller retries
// makes one attempt: it is not hedged either.
func TestNestedCallIsNotHedged(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	s := newScript()
	out := make(chan result, 1)
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	go func() {
		v, err := hedge.Do(ctx, h, s.op, s.release)
		out <- result{v, err}
	}()
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.noStart(t)
	s.answer(1, "v1", nil)
	if r := get(t, out); r.v != "v1" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if got, want := ev.String(), "[start#1 refused:nested end#1:success callend:success/1]"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}

func TestHedgeable(t *testing.T) {
	for _, tc := range []struct {
		method, key string
		body        bool
		getBody     bool
		want        bool
	}{
		{"GET", "", false, false, true},
		{"HEAD", "", false, false, true},
		{"PUT", "", true, true, true},
		{"DELETE", "", false, false, true},
		{"POST", "", true, true, false},
		{"PATCH", "", true, true, false},
		{"POST", "k", true, true, true},
		{"POST", "k", true, false, false}, // the body cannot be sent twice
		{"PUT", "", true, false, false},
	} {
		req, _ := http.NewRequest(tc.method, "http://127.0.0.1/", nil)
		if tc.body {
			req.Body = io.NopCloser(strings.NewReader("b"))
			if tc.getBody {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("b")), nil }
			}
		}
		if tc.key != "" {
			req.Header.Set("Idempotency-Key", tc.key)
		}
		if got := hedge.Hedgeable(req); got != tc.want {
			t.Errorf("%s key=%q body=%v getBody=%v: Hedgeable = %v", tc.method, tc.key, tc.body, tc.getBody, got)
		}
	}
}

// Regression (found by TestPropertyLimitsAndReleases): the value of an
// attempt that failed while a hedge ran is released when the hedge wins.
func TestFailedValueReleasedWhenHedgeWins(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", errors.New("transient"))
	ev.waitFor(t, "end#1:error") // the failure is in before the hedge answers
	s.answer(2, "v2", nil)
	if r := get(t, out); r.v != "v2" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("released %q, want [v1]", got)
	}
}

// Pushback that says "do not retry" (retry.Overloaded, gRFC A6's negative
// grpc-retry-pushback-ms) stops further hedges; the copy in flight may
// still answer, and if it fails too the call ends as overloaded.
func TestOverloadedStopsFurtherHedges(t *testing.T) {
	for _, hedgeAnswers := range []bool{true, false} {
		clk := clocktest.NewFake()
		ev := new(events)
		h := &hedge.Hedger{Policy: policy(clk, ev), Delay: 10 * time.Millisecond, MaxHedges: 3}
		s := newScript()
		out := run(h, s)
		s.wait(t, 1)
		clk.BlockUntil(1)
		clk.Advance(10 * time.Millisecond)
		s.wait(t, 2)
		s.answer(1, "v1", retry.Overloaded(errors.New("shed")))
		ev.waitFor(t, "end#1:")
		clk.Advance(time.Hour)
		s.noStart(t)
		if err := s.ctx(2).Err(); err != nil {
			t.Fatalf("the hedge in flight was stopped: %v", err)
		}
		if hedgeAnswers {
			s.answer(2, "v2", nil)
			if r := get(t, out); r.v != "v2" || r.err != nil {
				t.Fatalf("Do = %q, %v", r.v, r.err)
			}
			continue
		}
		s.answer(2, "v2", errors.New("transient"))
		r := get(t, out)
		if !errors.Is(r.err, retry.ErrOverloaded) {
			t.Fatalf("Do = %q, %v; events %s", r.v, r.err, ev)
		}
		if !strings.Contains(ev.String(), "callend:overloaded/2") {
			t.Fatalf("events %s", ev)
		}
	}
}

// AttemptOf tells an attempt its number and whether it is a hedge, also
// through contexts derived from it.
func TestAttemptOf(t *testing.T) {
	clk := clocktest.NewFake()
	h := &hedge.Hedger{Policy: policy(clk, nil), Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	for i, want := range []struct {
		n     int
		hedge bool
	}{{1, false}, {2, true}} {
		ctx, cancel := context.WithCancel(s.ctx(i + 1))
		n, isHedge, ok := hedge.AttemptOf(ctx)
		cancel()
		if !ok || n != want.n || isHedge != want.hedge {
			t.Errorf("attempt %d: AttemptOf = %d, %v, %v", i+1, n, isHedge, ok)
		}
	}
	if _, _, ok := hedge.AttemptOf(context.Background()); ok {
		t.Error("AttemptOf found an attempt in Background")
	}
	s.answer(2, "v2", nil)
	get(t, out)
}

// errObserver keeps the errors of ended attempts.
type errObserver struct {
	retry.NopObserver
	mu   sync.Mutex
	errs map[int]error
}

func (o *errObserver) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[int]error{}
	}
	o.errs[e.Attempt] = e.Err
}

// A cancelled loser ends with ErrLost, which is neither a downstream
// fault nor something a budget charges.
func TestLoserError(t *testing.T) {
	clk := clocktest.NewFake()
	obs := new(errObserver)
	h := &hedge.Hedger{Policy: policy(clk, obs), Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(2, "v2", nil)
	get(t, out)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	err := obs.errs[1]
	if !errors.Is(err, hedge.ErrLost) || !errors.Is(err, context.Canceled) || !retry.IsPermanent(err) || retry.IsDownstreamFault(err) {
		t.Fatalf("loser's error %v: ErrLost %v, Canceled %v, Permanent %v, fault %v", err,
			errors.Is(err, hedge.ErrLost), errors.Is(err, context.Canceled), retry.IsPermanent(err), retry.IsDownstreamFault(err))
	}
}
