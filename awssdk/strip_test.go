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
