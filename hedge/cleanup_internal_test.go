package hedge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// errPanicCtx is a caller's context whose Err panics once armed, and
// whose Done panics once doneArmed.
type errPanicCtx struct {
	context.Context
	armed, doneArmed atomic.Bool
}

func (c *errPanicCtx) Done() <-chan struct{} {
	if c.doneArmed.Load() {
		panic("boom in Done")
	}
	return c.Context.Done()
}

func (c *errPanicCtx) Err() error {
	if c.armed.Load() {
		panic("boom in Err")
	}
	return c.Context.Err()
}

// recordPanicker is a Budget whose Record panics on a success.
type recordPanicker struct{}

func (recordPanicker) Record(retry bool, err error) {
	if err == nil {
		panic("boom in Record")
	}
}
func (recordPanicker) Withdraw(error) bool { return true }

// endPanicker is an Observer whose AttemptEnd panics.
type endPanicker struct{ retry.NopObserver }

func (endPanicker) AttemptEnd(context.Context, retry.AttemptEnd) { panic("boom in AttemptEnd") }

// noWait retries at once.
type noWait struct{}

func (noWait) Delay(int, time.Duration) time.Duration { return 0 }

// busyCells reports the per-P cells left taken: with no Do running, a
// cell's call is free (or the cell empty).
func busyCells() []int {
	var busy []int
	for i := range cells {
		if cells[i].c.Load() != nil && cells[i].busy {
			busy = append(busy, i)
		}
	}
	return busy
}

// fillCells gives every per-P cell a fresh call, free, so that a Do on
// any P takes its call from a cell. No Do may be running.
func fillCells() {
	for i := range cells {
		cells[i].c.Store(pool.New().(*call))
		cells[i].busy = false
	}
}

// endedErr is ctx's Err, or what it panicked with.
func endedErr(ctx context.Context) (r any, err error) {
	defer func() { r = recover() }()
	return nil, ctx.Err()
}

// A user callback that panics at the end of a call, after its attempt
// answered (the caller's context's Err as Do ends the attempt's context,
// a Budget's Record of the success), or during it (op, Classify), leaves
// no per-P cell taken, every attempt's context ended (without calling the
// panicking parent again), and the value not returned released; the panic
// goes on.
func TestCleanupPanicsFreeEverything(t *testing.T) {
	if raceBuild {
		t.Log("the race detector's builds use no per-P cells: the cells are not checked")
	}
	transient := errors.New("transient")
	fused := func() *retry.Policy {
		return &retry.Policy{Budget: budget.NewRatio(budget.TenPercent()), Breaker: breaker.New(breaker.Config{})}
	}
	for _, tc := range []struct {
		name    string
		pol     func() *retry.Policy
		hedges  int
		errs    []error // the attempts' errors, by number (nil past the end)
		in      string  // "err": the caller's context's Err, armed by the last attempt; "op": op
		want    string
		release []string
	}{
		{"fused first attempt, Err", fused, 1, nil, "err", "boom in Err", []string{"v1"}},
		{"inline first attempt, Err", func() *retry.Policy { return &retry.Policy{} }, 1, nil, "err", "boom in Err", []string{"v1"}},
		{"observer, Err", func() *retry.Policy { return &retry.Policy{Observer: retry.NopObserver{}} }, 1, nil, "err", "boom in Err", []string{"v1"}},
		{"retried, Err", fused, 1, []error{transient}, "err", "boom in Err", []string{"v1", "v2"}},
		{"no hedges, Err", fused, NoHedges, []error{transient}, "err", "boom in Err", []string{"v1", "v2"}},
		{"Record of a success", func() *retry.Policy { return &retry.Policy{Budget: recordPanicker{}} }, 1, nil, "", "boom in Record", []string{"v1"}},
		{"op", fused, 1, nil, "op", "boom in op", nil},
		{"the parent's Done, in op", fused, 1, nil, "done", "boom in Done", nil},
		{"Observer's AttemptEnd", func() *retry.Policy { return &retry.Policy{Observer: endPanicker{}} }, 1, nil, "", "boom in AttemptEnd", []string{"v1"}},
		{"Classify", func() *retry.Policy {
			return &retry.Policy{Classify: func(error) bool { panic("boom in Classify") }}
		}, 1, []error{transient}, "", "boom in Classify", []string{"v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pol()
			p.MaxAttempts = 3
			p.Backoff = noWait{}
			pc := &errPanicCtx{Context: context.Background()}
			var mu sync.Mutex
			var ctxs []context.Context
			var released []string
			n := 0
			op := func(ctx context.Context) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				n++
				ctxs = append(ctxs, ctx)
				var err error
				if n <= len(tc.errs) {
					err = tc.errs[n-1]
				} else if tc.in == "err" {
					pc.armed.Store(true)
				} else if tc.in == "op" {
					panic("boom in op")
				} else if tc.in == "done" {
					// The attempt's context makes its real one,
					// whose registration with the parent panics.
					pc.doneArmed.Store(true)
					mu.Unlock()
					defer mu.Lock()
					ctx.Done()
				}
				return fmt.Sprintf("v%d", n), err
			}
			h := &Hedger{Policy: p, Delay: time.Hour, MaxHedges: tc.hedges}
			fillCells()
			r := func() (r any) {
				defer func() { r = recover() }()
				Do(pc, h, op, func(v string) { mu.Lock(); released = append(released, v); mu.Unlock() })
				return nil
			}()
			if r == nil || !strings.HasPrefix(fmt.Sprint(r), tc.want) {
				t.Fatalf("Do panicked with %v, want %q", r, tc.want)
			}
			if b := busyCells(); len(b) > 0 {
				t.Errorf("per-P cells %v left taken", b)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(released) != fmt.Sprint(tc.release) {
				t.Errorf("released %v, want %v", released, tc.release)
			}
			for i, ctx := range ctxs {
				if r, err := endedErr(ctx); r != nil || err == nil {
					t.Errorf("attempt %d's context: Err = %v, panic %v; want it ended", i+1, err, r)
				}
			}
		})
	}
}

// BeginInline's first attempt, the Budget's Record panicking on its
// success: a fresh Do on the same goroutine takes a call as usual (the
// panicking call is not handed out again while a cell still marks it
// taken, nor reused in a state the panic left).
func TestRecordPanicCallNotReused(t *testing.T) {
	p := &retry.Policy{Budget: recordPanicker{}}
	h := &Hedger{Policy: p, Delay: time.Hour}
	for range 3 {
		fillCells()
		func() {
			defer func() { _ = recover() }()
			Do(context.Background(), h, func(context.Context) (int, error) { return 1, nil }, nil)
		}()
	}
	if b := busyCells(); len(b) > 0 {
		t.Errorf("per-P cells %v left taken", b)
	}
	v, err := Do(context.Background(), &Hedger{Delay: time.Hour}, func(context.Context) (int, error) { return 2, nil }, nil)
	if v != 2 || err != nil {
		t.Fatalf("Do = %v, %v", v, err)
	}
}

// A hedged round whose caller's context's Err starts panicking as the
// hedge answers: the panic reaches the caller, every attempt ends and
// every value not returned is released, no goroutine is left (goleak)
// and no cell taken.
func TestHedgedRoundErrPanic(t *testing.T) {
	clk := clocktest.NewFake()
	pc := &errPanicCtx{Context: context.Background()}
	h := &Hedger{Policy: &retry.Policy{Clock: clk}, Delay: 10 * time.Millisecond}
	first := make(chan struct{})
	hedged := make(chan struct{})
	var mu sync.Mutex
	var ctxs []context.Context
	var released []string
	op := func(ctx context.Context) (string, error) {
		mu.Lock()
		ctxs = append(ctxs, ctx)
		mu.Unlock()
		if n, _, _ := AttemptOf(ctx); n == 1 {
			close(first)
			<-hedged
			return "v1", nil
		}
		pc.armed.Store(true)
		close(hedged)
		return "v2", nil
	}
	done := make(chan any)
	fillCells()
	go func() {
		defer func() { done <- recover() }()
		Do(pc, h, op, func(v string) { mu.Lock(); released = append(released, v); mu.Unlock() })
	}()
	<-first
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	r := <-done
	if r == nil || !strings.HasPrefix(fmt.Sprint(r), "boom in Err") {
		t.Fatalf("Do panicked with %v, want boom in Err", r)
	}
	if b := busyCells(); len(b) > 0 {
		t.Errorf("per-P cells %v left taken", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(released) != 2 {
		t.Errorf("released %v, want v1 and v2", released)
	}
	for i, ctx := range ctxs {
		if r, err := endedErr(ctx); r != nil || err == nil {
			t.Errorf("attempt %d's context: Err = %v, panic %v; want it ended", i+1, err, r)
		}
	}
}

// A group's build that panics as Do resolves the key's Adaptive (user
// code, before any permit is taken) leaves no per-P cell taken.
func TestGroupBuildPanicFreesCell(t *testing.T) {
	g, err := keyed.New(keyed.Config{}, func(k string) *Adaptive {
		if k == "boom" {
			panic("build")
		}
		return NewAdaptive(AdaptiveConfig{})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &Hedger{Delay: time.Hour, Adaptives: g}
	fillCells()
	func() {
		defer func() {
			if r := recover(); r != "build" {
				t.Fatalf("recovered %v, want the build panic", r)
			}
		}()
		Do(keyed.WithKey(context.Background(), "boom"), h, func(context.Context) (int, error) { return 1, nil }, nil)
	}()
	if b := busyCells(); len(b) > 0 {
		t.Errorf("per-P cells %v left taken", b)
	}
}
