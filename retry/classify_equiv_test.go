package retry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// referenceClassifier is DefaultClassifier as it was written before the
// one-pass version: one search of the chain per question, in order.
func referenceClassifier(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	if walk(err, isTimeout) {
		return true
	}
	if walk(err, isCanceled) {
		return false
	}
	if IsTransientNetError(err) {
		return true
	}
	return !walk(err, isFatal)
}

func TestDefaultClassifierMatchesReference(t *testing.T) {
	leaves := []error{
		context.Canceled, context.DeadlineExceeded, ErrAttemptTimeout, syscall.ECONNRESET, syscall.ECONNREFUSED,
		&net.DNSError{Err: "no such host", IsNotFound: true}, &net.DNSError{Err: "try again", IsTemporary: true},
		x509.HostnameError{}, errors.New("plain"), &attemptTimeoutError{errors.New("x")}, syscall.EINVAL,
	}
	var gen func(depth int) *rapid.Generator[error]
	gen = func(depth int) *rapid.Generator[error] {
		return rapid.Custom(func(t *rapid.T) error {
			kind := 0
			if depth > 0 {
				kind = rapid.IntRange(0, 3).Draw(t, "kind")
			}
			switch kind {
			case 1:
				return fmt.Errorf("wrap: %w", gen(depth-1).Draw(t, "inner"))
			case 2:
				return errors.Join(gen(depth-1).Draw(t, "a"), gen(depth-1).Draw(t, "b"))
			case 3:
				return Permanent(gen(depth-1).Draw(t, "perm"))
			}
			return leaves[rapid.IntRange(0, len(leaves)-1).Draw(t, "leaf")]
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		err := gen(4).Draw(t, "err")
		if got, want := DefaultClassifier(err), referenceClassifier(err); got != want {
			t.Fatalf("DefaultClassifier(%v) = %v, the reference says %v", err, got, want)
		}
	})
}

func TestFindSearchesBothUnwrapForms(t *testing.T) {
	target := syscall.ECONNRESET
	isReset := func(e error) bool { return e == target }
	for _, err := range []error{target, fmt.Errorf("a: %w", target), errors.Join(errors.New("x"), fmt.Errorf("b: %w", target))} {
		if !Find(err, isReset) {
			t.Errorf("Find(%v) = false", err)
		}
	}
	if Find(errors.Join(errors.New("x"), errors.New("y")), isReset) || Find(nil, isReset) {
		t.Error("Find matched what is not there")
	}
}

// Call.classify, one walk of the chain under DefaultClassifier, must give
// what the three searches it replaces give: retryable as Call.retryable
// judges it (IsPermanent, then DefaultClassifier) and, for an error it
// retries, the advice RetryAfter finds, for chains mixing Permanent, After and both forms of
// wrapping; with a Classify, and for a *PanicError, the same.
func TestCallClassifyMatchesSeparateSearches(t *testing.T) {
	leaves := []error{
		context.Canceled, context.DeadlineExceeded, syscall.ECONNRESET, errors.New("plain"),
		&net.DNSError{Err: "no such host", IsNotFound: true}, &PanicError{Value: "boom"},
	}
	var gen func(depth int) *rapid.Generator[error]
	gen = func(depth int) *rapid.Generator[error] {
		return rapid.Custom(func(t *rapid.T) error {
			kind := 0
			if depth > 0 {
				kind = rapid.IntRange(0, 4).Draw(t, "kind")
			}
			switch kind {
			case 1:
				return fmt.Errorf("wrap: %w", gen(depth-1).Draw(t, "inner"))
			case 2:
				return errors.Join(gen(depth-1).Draw(t, "a"), gen(depth-1).Draw(t, "b"))
			case 3:
				return Permanent(gen(depth-1).Draw(t, "perm"))
			case 4:
				return After(gen(depth-1).Draw(t, "after"), time.Duration(rapid.IntRange(-2, 5).Draw(t, "d")))
			}
			return leaves[rapid.IntRange(0, len(leaves)-1).Draw(t, "leaf")]
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		err := gen(4).Draw(t, "err")
		for _, p := range []*Policy{{}, {Classify: func(e error) bool { return !errors.Is(e, context.Canceled) }}} {
			c := NewCall(context.Background(), p)
			r, d, ok := c.classify(err)
			wd, wok := RetryAfter(err)
			want := c.retryable(err)
			if !want { // the advice of an error not retried is not used
				d, ok, wd, wok = 0, false, 0, false
			}
			if r != want || d != wd || ok != wok {
				t.Fatalf("classify(%v) = %v, %v, %v; the separate searches give %v, %v, %v", err, r, d, ok, want, wd, wok)
			}
		}
	})
}
