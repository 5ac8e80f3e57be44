package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"unsafe"
)

// kindErr[T] are distinct plain error types, one per T.
type kindErr[T any] struct{}

func (kindErr[T]) Error() string { return "kind" }

type timeoutOnly struct{}

func (timeoutOnly) Error() string   { return "t" }
func (timeoutOnly) Timeout() bool   { return true }
func (timeoutOnly) Temporary() bool { return true } // a net.Error

type isErr struct{}

func (isErr) Error() string        { return "is" }
func (isErr) Is(target error) bool { return target == ErrAttemptTimeout }
func (isErr) Unwrap() error        { return nil }
func (isErr) Temporary() bool      { return false }

// TestErrKindsKeepTheVerdicts checks that DefaultClassifier and
// Call.classify judge an error of a remembered type (errKinds) as flagsOf
// does, before and after its type is remembered, also once every slot is
// taken by other types.
func TestErrKindsKeepTheVerdicts(t *testing.T) {
	leaves := []error{
		errors.New("plain"), context.Canceled, context.DeadlineExceeded, ErrAttemptTimeout, ErrOverloaded,
		syscall.ECONNRESET, syscall.EINVAL, &net.DNSError{IsTemporary: true}, timeoutOnly{}, isErr{},
		kindErr[int]{}, kindErr[string]{}, kindErr[bool]{}, kindErr[byte]{}, kindErr[rune]{},
		kindErr[float32]{}, kindErr[float64]{}, kindErr[complex64]{}, kindErr[uint]{}, kindErr[int8]{},
		Permanent(errors.New("p")), After(errors.New("a"), 1),
	}
	c := Call{p: &zeroPolicy, ctx: context.Background()}
	for round := range 3 {
		for _, leaf := range leaves {
			for _, err := range []error{leaf, fmt.Errorf("w: %w", leaf), errors.Join(errors.New("x"), leaf)} {
				want := referenceClassifier(err)
				if got := DefaultClassifier(err); got != want {
					t.Errorf("round %d: DefaultClassifier(%#v) = %v, want %v", round, err, got, want)
				}
				var ref scanned
				walk(err, ref.scan)
				if s := scanChain(err); s.f.retryable() != ref.f.retryable() || s.hasAdv != ref.hasAdv || s.adv != ref.adv {
					t.Errorf("round %d: scanChain(%#v) = %+v, the walk finds %+v", round, err, s, ref)
				}
				if r, _, _ := c.classify(err); r != want {
					t.Errorf("round %d: classify(%#v) = %v, want %v", round, err, r, want)
				}
			}
		}
	}
	plain, wrapped := error(errors.New("x")), fmt.Errorf("w: %w", errors.New("x"))
	if !isPlainErr(plain) || isPlainErr(wrapped) || isPlainErr(isErr{}) || isPlainErr(timeoutOnly{}) || isPlainErr(syscall.EINVAL) {
		t.Error("isPlainErr misjudges a type")
	}
	for _, e := range []error{plain, wrapped} {
		w, found := typeWord(unsafe.Pointer(&e)), false
		for i := range errKinds {
			if k := errKinds[i].Load(); k&^1 == w {
				found = true
			}
		}
		if !found && errKinds[len(errKinds)-1].Load() == 0 {
			t.Errorf("%T not remembered while a slot is free", e)
		}
	}
}
