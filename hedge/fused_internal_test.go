package hedge

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/retry"
)

// TestInlineOfLayout: inlineOf writes retry.Inline as the one function it
// is; if retry.Inline changes, this fails before a call misbehaves.
func TestInlineOfLayout(t *testing.T) {
	typ := reflect.TypeFor[retry.Inline]()
	if typ.NumField() != 1 || typ.Field(0).Type != reflect.TypeFor[func(error)]() || typ.Field(0).Offset != 0 ||
		unsafe.Sizeof(retry.Inline{}) != unsafe.Sizeof((func(error))(nil)) {
		t.Fatalf("retry.Inline is not one func(error): inlineOf must change with it")
	}
	var got []error
	in := inlineOf(func(err error) { got = append(got, err) })
	var rc retry.Call
	a := rc.Adopt(context.Background(), &retry.Policy{MaxAttempts: 1}, in)
	boom := errors.New("boom")
	rc.End(&a, boom)
	if len(got) != 1 || got[0] != boom {
		t.Fatalf("the adopted attempt's done heard %v, want [%v]", got, boom)
	}
	got = nil
	inlineOf(func(err error) { got = append(got, err) }).Succeed(nil)
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("Succeed told done %v, want [<nil>]", got)
	}
	inlineOf(nil).Succeed(nil) // the zero Inline: no done to call
	got = nil
	inlineDone(inlineOf(func(err error) { got = append(got, err) }))(boom)
	if len(got) != 1 || got[0] != boom || inlineDone(retry.Inline{}) != nil {
		t.Fatalf("inlineDone is not inlineOf's inverse: heard %v", got)
	}
}

// TestInlineFirstIsRetrys: hedge's inlineFirst, a copy of retry's check
// of what a first attempt needs set up around it, accepts exactly the
// Policies that retry.BeginInline begins (group-free Policies, so that
// only the check tells them apart): if retry
// adds a field that needs setting up, this fails before hedge's fused
// start skips it.
func TestInlineFirstIsRetrys(t *testing.T) {
	for _, c := range []struct {
		name string
		p    retry.Policy
	}{
		{"plain", retry.Policy{}},
		{"Observer", retry.Policy{Observer: retry.NopObserver{}}},
		{"AttemptTimeout", retry.Policy{AttemptTimeout: time.Second}},
		{"MaxElapsed", retry.Policy{MaxElapsed: time.Second}},
		{"Limiter", retry.Policy{Limiter: limiterStub{}}},
		{"NestedBudget", retry.Policy{NestedBudget: nopBudget{}}},
	} {
		p := c.p
		in, ok, err := retry.BeginInline(context.Background(), &p)
		if err != nil {
			t.Fatalf("%s: BeginInline: %v", c.name, err)
		}
		if ok {
			in.Succeed(&p)
		}
		if got := inlineFirst(&p); got != ok {
			t.Errorf("%s: inlineFirst %v, retry.BeginInline began it: %v", c.name, got, ok)
		}
	}
}

type limiterStub struct{}

func (limiterStub) Acquire(context.Context, bool) (func(error), error) { return func(error) {}, nil }

type nopBudget struct{}

func (nopBudget) Record(bool, error)  {}
func (nopBudget) Withdraw(error) bool { return true }
