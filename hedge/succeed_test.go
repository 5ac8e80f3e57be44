package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// recordingBudget is a Budget that keeps what Record hears, and panics
// in Record when panicWith is set.
type recordingBudget struct {
	mu        sync.Mutex
	records   []error
	panicWith any
}

func (b *recordingBudget) Record(_ bool, err error) {
	b.mu.Lock()
	b.records = append(b.records, err)
	b.mu.Unlock()
	if b.panicWith != nil {
		panic(b.panicWith)
	}
}

func (b *recordingBudget) Withdraw(error) bool { return true }

// goexitDone is a breaker whose done calls runtime.Goexit on a success.
type goexitDone struct{}

func (goexitDone) Allow() (func(error), error) {
	return func(err error) {
		if err == nil {
			runtime.Goexit()
		}
	}, nil
}
func (goexitDone) Ready() error { return nil }

// The inline first attempt's success is told to the breaker and then to
// the budget (do splits Inline.Succeed in two): when the breaker's done
// panics, the budget hears the attempt fail with a *retry.PanicError
// carrying the panic, exactly once, as Inline.Succeed tells it; the value
// is released and the panic goes on. A Budget that panics in that Record
// has its panic go on instead, with the value released all the same.
func TestInlineSucceedPanicTellsBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fake   bool
		budget any // the Budget's own panic, or nil
	}{
		{"real clock", false, nil},
		{"fake clock", true, nil},
		{"budget panics too", false, "boom in record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &recordingBudget{panicWith: tc.budget}
			p := &retry.Policy{MaxAttempts: 3, Breaker: panickyDone{}, Budget: b}
			if tc.fake {
				p.Clock = clocktest.NewFake()
			}
			h := &hedge.Hedger{Policy: p, Delay: time.Hour}
			o := &valuesOp{}
			want := any("boom in done")
			if tc.budget != nil {
				want = tc.budget
			}
			if r, _, _ := doPanics(h, o.op, o.release); r != want {
				t.Fatalf("panic %v, want %v", r, want)
			}
			if !slices.Equal(o.released, []string{"v1"}) {
				t.Fatalf("released %q, want [v1]", o.released)
			}
			if len(b.records) != 1 {
				t.Fatalf("budget heard %v, want one failed attempt", b.records)
			}
			var pe *retry.PanicError
			if !errors.As(b.records[0], &pe) || pe.Value != "boom in done" {
				t.Fatalf("budget heard %v, want a *retry.PanicError of boom in done", b.records[0])
			}
			if len(o.ctxs) != 1 || o.ctxs[0].Err() == nil {
				t.Fatalf("the attempt's context was not cancelled")
			}
		})
	}
}

// A breaker's done that calls runtime.Goexit on the inline attempt's
// success: the budget hears the attempt fail with a *retry.PanicError
// (nil value), the value is released, and the goroutine exits.
func TestInlineSucceedGoexitTellsBudget(t *testing.T) {
	b := &recordingBudget{}
	h := &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 3, Breaker: goexitDone{}, Budget: b}, Delay: time.Hour}
	o := &valuesOp{}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		hedge.Do(context.Background(), h, o.op, o.release)
		returned = true
	}()
	<-done
	if returned {
		t.Fatal("Do returned after its breaker's done called runtime.Goexit")
	}
	if !slices.Equal(o.released, []string{"v1"}) {
		t.Fatalf("released %q, want [v1]", o.released)
	}
	var pe *retry.PanicError
	if len(b.records) != 1 || !errors.As(b.records[0], &pe) || pe.Value != nil {
		t.Fatalf("budget heard %v, want one *retry.PanicError with no value", b.records)
	}
}

// A successful inline attempt tells the budget once, a success (nil),
// as Inline.Succeed does and as retry.Do tells it, on the real clock and
// a fake one; a breaker's done that panics on the success makes the
// budget hear what it hears from retry.Do.
func TestInlineSucceedTellsBudgetAsRetryDo(t *testing.T) {
	for _, fake := range []bool{false, true} {
		for _, br := range []retry.Breaker{nil, panickyDone{}} {
			var heard [2][]error
			for i, hedged := range []bool{false, true} {
				b := &recordingBudget{}
				p := &retry.Policy{MaxAttempts: 3, Budget: b, Breaker: br}
				if fake {
					p.Clock = clocktest.NewFake()
				}
				h := &hedge.Hedger{Policy: p, Delay: time.Hour}
				for range 3 {
					func() {
						defer func() { _ = recover() }()
						if hedged {
							hedge.Do(context.Background(), h, fast, nil)
						} else {
							retry.Do(context.Background(), p, fast)
						}
					}()
				}
				heard[i] = b.records
			}
			if len(heard[1]) != 3 || fmt.Sprint(heard[0]) != fmt.Sprint(heard[1]) {
				t.Errorf("fake %v, breaker %T: budget heard %v from hedge.Do, %v from retry.Do", fake, br, heard[1], heard[0])
			}
		}
	}
}
