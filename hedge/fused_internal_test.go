package hedge

import (
	"context"
	"errors"
	"reflect"
	"testing"
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
}
