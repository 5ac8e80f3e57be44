package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// script runs attempts that the test answers one by one.
type script struct {
	mu       sync.Mutex
	started  chan int // attempt numbers, in start order
	answers  map[int]chan answer
	ctxs     map[int]context.Context
	n        int
	released []string
}

// errPanic, as an answer's error, makes the attempt panic with its value.
var errPanic = errors.New("panic")

type answer struct {
	v   string
	err error
}

func newScript() *script {
	return &script{started: make(chan int, 16), answers: map[int]chan answer{}, ctxs: map[int]context.Context{}}
}

func (s *script) ch(n int) chan answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.answers[n]
	if !ok {
		c = make(chan answer, 1)
		s.answers[n] = c
	}
	return c
}

// op is the operation: attempt n waits for its answer or its context.
func (s *script) op(ctx context.Context) (string, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.ctxs[n] = ctx
	s.mu.Unlock()
	c := s.ch(n)
	s.started <- n
	select {
	case a := <-c:
		if a.err == errPanic {
			panic(a.v)
		}
		return a.v, a.err
	case <-ctx.Done():
		return fmt.Sprintf("v%d-cancelled", n), ctx.Err()
	}
}

func (s *script) answer(n int, v string, err error) { s.ch(n) <- answer{v, err} }

func (s *script) ctx(n int) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctxs[n]
}

func (s *script) release(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, v)
}

func (s *script) releasedValues() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.released...)
}

func (s *script) wait(t *testing.T, want int) {
	t.Helper()
	select {
	case n := <-s.started:
		if n != want {
			t.Fatalf("attempt %d started, want %d", n, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("attempt %d did not start", want)
	}
}

func (s *script) noStart(t *testing.T) {
	t.Helper()
	select {
	case n := <-s.started:
		t.Fatalf("attempt %d started early", n)
	default:
	}
}

type result struct {
	v   string
	err error
}

func run(h *hedge.Hedger, s *script) chan result {
	out := make(chan result, 1)
	go func() {
		v, err := hedge.Do(context.Background(), h, s.op, s.release)
		out <- result{v, err}
	}()
	return out
}

func get(t *testing.T, out chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
	}
	return result{}
}

// events records hedge events as strings.
type events struct {
	retry.NopObserver
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) AttemptStart(ctx context.Context, s retry.AttemptStart) context.Context {
	e.add(fmt.Sprintf("start#%d", s.Attempt))
	return ctx
}

func (e *events) AttemptEnd(_ context.Context, s retry.AttemptEnd) {
	e.add(fmt.Sprintf("end#%d:%s", s.Attempt, s.Outcome))
}

func (e *events) RetryScheduled(_ context.Context, s retry.RetryScheduled) {
	e.add(fmt.Sprintf("retry#%d", s.Attempt))
}

func (e *events) CallEnd(_ context.Context, s retry.CallEnd) {
	e.add(fmt.Sprintf("callend:%s/%d", s.Reason, s.Attempts))
}

func (e *events) HedgeStarted(_ context.Context, h hedge.Event) {
	e.add(fmt.Sprintf("hedge#%d", h.Attempt))
}

func (e *events) HedgeWon(_ context.Context, h hedge.Event) { e.add(fmt.Sprintf("won#%d", h.Attempt)) }

func (e *events) HedgeCancelled(_ context.Context, h hedge.Event) {
	e.add(fmt.Sprintf("cancelled#%d", h.Attempt))
}

func (e *events) HedgeRefused(_ context.Context, h hedge.Event) {
	e.add(fmt.Sprintf("refused:%s", h.Reason))
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprint(e.log)
}

// waitFor waits until the log holds sub: the goroutines of the call have
// got there. It polls, bounded, and waits for no clock.
func (e *events) waitFor(t *testing.T, sub string) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if strings.Contains(e.String(), sub) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no %q in %s", sub, e.String())
}
