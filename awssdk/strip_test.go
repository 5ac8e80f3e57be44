package awssdk

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// wrapper is an error wrapper strip does not know, with an exported
// error field.
type wrapper struct{ Err error }

func (w *wrapper) Error() string { return "wrapped: " + w.Err.Error() }
func (w *wrapper) Unwrap() error { return w.Err }

// valueMulti is an uncomparable error value whose Unwrap returns one
// error.
type valueMulti struct{ errs []error }

func (v valueMulti) Error() string { return fmt.Sprint(v.errs) }
func (v valueMulti) Unwrap() error { return v.errs[0] }

// TestStripRebuildsOrLeavesTheChain (s4 aws sweep): strip takes the
// attempt's own error out of a wrapper it does not know (an exported
// error field), of errors.Join, and leaves an uncomparable value holding
// it as it is, without panicking, keeping its text.
func TestStripRebuildsOrLeavesTheChain(t *testing.T) {
	base := errors.New("base")
	ae := func() error { return &attemptError{err: base} }

	w := &wrapper{Err: ae()}
	if got := strip(w); got != w || w.Err != base {
		t.Errorf("strip(wrapper) = %v with field %T, want the wrapper holding base", got, w.Err)
	}
	j := strip(errors.Join(ae(), errSame))
	if errs := j.(interface{ Unwrap() []error }).Unwrap(); errs[0] != base || errs[1] != errSame || j.Error() != "base\nsame" {
		t.Errorf("strip(Join) = %q %v", j, errs)
	}
	v := &wrapper{Err: valueMulti{errs: []error{ae()}}}
	if got := strip(v); got != v || got.Error() != "wrapped: [base]" {
		t.Errorf("strip(uncomparable) = %v, want it unchanged", got)
	}
}

// A typed nil response error, or an AWS one with no response error
// inside, has no header: responseHeader returns nil instead of looping
// for good (or dereferencing nil).
func TestResponseHeaderOfNilResponseErrors(t *testing.T) {
	for _, err := range []error{
		(*smithyhttp.ResponseError)(nil),
		(*awshttp.ResponseError)(nil),
		&awshttp.ResponseError{},
		fmt.Errorf("wrapped: %w", (*smithyhttp.ResponseError)(nil)),
	} {
		done := make(chan http.Header, 1)
		go func() { done <- responseHeader(err) }()
		select {
		case h := <-done:
			if h != nil {
				t.Errorf("%T: header %v, want nil", err, h)
			}
		case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
			t.Fatalf("%T: responseHeader did not return", err)
		}
	}
}

// innerErr and outerErr are two error types whose values can share one
// address (outerErr's first field).
type innerErr struct{ code int }

func (e *innerErr) Error() string { return fmt.Sprint("inner ", e.code) }

type outerErr struct{ inner innerErr }

func (e *outerErr) Error() string { return "outer" }

// TestHeldValueIsTheVeryValue (s5 awssdk): the Retryer holds an
// operation's error value by its address; another value at that address
// (a struct's first field) is not taken for it: while the first is held
// it is handed over wrapped, RetryDelay's look-up does not find the first
// operation through it, and once RetryDelay let go of the first it is
// held as it is.
func TestHeldValueIsTheVeryValue(t *testing.T) {
	held0, wrapping0 := holdCounts()
	a, b := newOp(1), newOp(1)
	o := &outerErr{}
	e1, e2 := error(o), error(&o.inner)
	if got := hand(a, e1); got != e1 {
		t.Fatalf("hand(a, outer) = %T, want the value itself", got)
	}
	if got, ok := hand(b, e2).(*attemptError); !ok || got.op != b {
		t.Fatalf("hand(b, inner) at the held address = %T, want b's attemptError", got)
	}
	if op, _, _ := failed(e2, 1); op != nil {
		t.Errorf("failed(inner) found an operation through outer's address")
	}
	if op, _, _ := failed(e1, 1); op != a {
		t.Errorf("failed(outer) = %p, want a (%p)", op, a)
	}
	if got := hand(b, e2); got != e2 {
		t.Errorf("hand(b, inner) once a let go = %T, want the value itself", got)
	}
	a.end()
	b.end()
	if held, w := holdCounts(); held != held0 || w != wrapping0 {
		t.Errorf("after both ended: %d held, %d wrapping, want %d, %d", held, w, held0, wrapping0)
	}
}

// holdCounts returns the number of error values held (holds) and of
// operations counted in wrapping, of the whole process.
func holdCounts() (held int, wrapped int64) {
	holds.mu.Lock()
	defer holds.mu.Unlock()
	return len(holds.m), wrapping.Load()
}
