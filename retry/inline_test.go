package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// TestBeginInlineMatchesDo drives a call through BeginInline, Succeed and
// Adopt the way an adapter does, beside the same call through Do, and
// checks that the breaker and the budget hear the same things, in the
// same order, with the same result.
func TestBeginInlineMatchesDo(t *testing.T) {
	transient := errors.New("transient")
	for _, tc := range []struct {
		name  string
		fails int // attempts that fail before one succeeds
	}{
		{"first succeeds", 0},
		{"first fails", 1},
		{"two fail", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newPolicy := func() (*retry.Policy, *stubBreaker, *trackingBudget) {
				br, bu := &stubBreaker{}, &trackingBudget{}
				return &retry.Policy{MaxAttempts: 4, Breaker: br, Budget: bu, Backoff: backoff.Constant{}}, br, bu
			}
			pDo, brDo, buDo := newPolicy()
			n := 0
			vDo, errDo := retry.Do(context.Background(), pDo, func(context.Context) (int, error) {
				n++
				if n <= tc.fails {
					return n, transient
				}
				return n, nil
			})

			p, br, bu := newPolicy()
			ctx := context.Background()
			in, ok, err := retry.BeginInline(ctx, p)
			if !ok || err != nil {
				t.Fatalf("BeginInline = %v, %v; want an inline attempt", ok, err)
			}
			var v int
			var c retry.Call
			k := 1
			if tc.fails == 0 {
				v = k
				in.Succeed(p)
			} else {
				a := c.Adopt(ctx, p, in)
				if a.N != 1 || a.Context != ctx || c.Attempts() != 1 {
					t.Fatalf("Adopt = attempt %d with %v, Attempts %d", a.N, a.Context, c.Attempts())
				}
				err := c.End(&a, transient)
				for {
					d, gerr := c.Next(err)
					if gerr != nil {
						t.Fatal(gerr)
					}
					c.Wait(d)
					if a, gerr = c.Begin(); gerr != nil {
						t.Fatal(gerr)
					}
					k++
					if k <= tc.fails {
						err = c.End(&a, transient)
						continue
					}
					if err = c.End(&a, nil); err != nil {
						t.Fatal(err)
					}
					c.Succeed()
					v = k
					break
				}
			}
			if v != vDo || errDo != nil {
				t.Fatalf("inline gave %d, Do gave %d, %v", v, vDo, errDo)
			}
			if len(br.results) != len(brDo.results) || br.allowed != brDo.allowed {
				t.Fatalf("breaker heard %v (%d allowed), with Do %v (%d)", br.results, br.allowed, brDo.results, brDo.allowed)
			}
			for i := range br.results {
				if (br.results[i] == nil) != (brDo.results[i] == nil) {
					t.Errorf("breaker result %d: %v, with Do %v", i, br.results[i], brDo.results[i])
				}
			}
			if bu.records.Load() != buDo.records.Load() || bu.retries.Load() != buDo.retries.Load() ||
				bu.started.Load() != buDo.started.Load() || bu.withdrawn.Load() != buDo.withdrawn.Load() {
				t.Errorf("budget: records %d retries %d started %d withdrawn %d; with Do %d %d %d %d",
					bu.records.Load(), bu.retries.Load(), bu.started.Load(), bu.withdrawn.Load(),
					buDo.records.Load(), buDo.retries.Load(), buDo.started.Load(), buDo.withdrawn.Load())
			}
		})
	}
}

// TestBeginInlineDeclines covers the policies and contexts a first attempt
// cannot begin inline for, and the breaker's refusal.
func TestBeginInlineDeclines(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		p    *retry.Policy
	}{
		{"observer", context.Background(), &retry.Policy{Observer: &retrytest.Recorder{}}},
		{"attempt timeout", context.Background(), &retry.Policy{AttemptTimeout: time.Second}},
		{"max elapsed", context.Background(), &retry.Policy{MaxElapsed: time.Second}},
		{"nested budget", context.Background(), &retry.Policy{NestedBudget: &trackingBudget{}}},
		{"ended context", canceled, &retry.Policy{}},
	} {
		bu := &trackingBudget{}
		br := &stubBreaker{}
		tc.p.Budget, tc.p.Breaker = bu, br
		if _, ok, err := retry.BeginInline(tc.ctx, tc.p); ok || err != nil {
			t.Errorf("%s: BeginInline = %v, %v; want false, nil", tc.name, ok, err)
		}
		if br.allowed != 0 || bu.started.Load() != 0 {
			t.Errorf("%s: BeginInline declined but asked the breaker (%d) or told the budget (%d)", tc.name, br.allowed, bu.started.Load())
		}
	}
	if _, ok, err := retry.BeginInline(context.Background(), nil); !ok || err != nil {
		t.Errorf("nil Policy: BeginInline = %v, %v; want true, nil", ok, err)
	}

	open := errors.New("open")
	p := &retry.Policy{Breaker: &stubBreaker{allowErr: open}}
	_, ok, err := retry.BeginInline(context.Background(), p)
	var re *retry.Error
	if ok || !errors.As(err, &re) || re.Attempts != 0 || !errors.Is(err, open) {
		t.Fatalf("refused: BeginInline = %v, %v; want an *Error like Do's", ok, err)
	}
	_, doErr := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, nil })
	if err.Error() != doErr.Error() {
		t.Errorf("refused: BeginInline's error %q, Do's %q", err, doErr)
	}
}

// TestCallResetForgetsTheLastCall reuses one Call for two calls: the
// second starts from its first attempt under its own Policy.
func TestCallResetForgetsTheLastCall(t *testing.T) {
	ctx := context.Background()
	transient := errors.New("transient")
	var c retry.Call
	c.Reset(ctx, &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}})
	for i := range 2 {
		a, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Next(c.End(&a, transient))
		if i == 1 {
			if !errors.Is(err, retry.ErrAttemptsExhausted) {
				t.Fatalf("first call: Next = %v, want attempts exhausted", err)
			}
			break
		}
		c.Wait(d)
	}
	rec := &retrytest.Recorder{}
	c.Reset(ctx, &retry.Policy{MaxAttempts: 3, Observer: rec})
	if c.Attempts() != 0 {
		t.Fatalf("after Reset: Attempts = %d", c.Attempts())
	}
	a, err := c.Begin()
	if err != nil || a.N != 1 || a.Delay != 0 {
		t.Fatalf("after Reset: Begin = attempt %d after %v, %v", a.N, a.Delay, err)
	}
	if err := c.End(&a, nil); err != nil {
		t.Fatal(err)
	}
	c.Succeed()
	if got := rec.Calls(); len(got) != 1 || got[0].Attempts != 1 || got[0].Err != nil {
		t.Errorf("after Reset: the Observer heard %+v, want one call of one attempt", got)
	}
}
