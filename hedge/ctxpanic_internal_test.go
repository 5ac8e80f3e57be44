package hedge

import (
	"context"
	"errors"
	"testing"
)

// panicked runs f and returns what it panicked with.
func panicked(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// An attempt's context whose parent's Err panics: cancel leaves it live
// (its doc), cancelSafe and cancelQuiet end it with context.Canceled
// without asking the parent again, cancelSafe's panic goes on and
// cancelQuiet returns it.
func TestCancelParentErrPanics(t *testing.T) {
	pc := &errPanicCtx{Context: context.Background()}
	pc.armed.Store(true)

	x := newAttemptCtx(pc, 1, false)
	if r := panicked(x.cancel); r != "boom in Err" {
		t.Fatalf("cancel panicked with %v", r)
	}
	if st := x.state.Load(); st != live {
		t.Fatalf("after cancel's panic: state %d, want live and unlocked", st)
	}
	if r := panicked(x.cancelSafe); r != "boom in Err" {
		t.Fatalf("cancelSafe panicked with %v, want the parent's panic", r)
	}
	if err := x.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancelSafe: Err = %v, want context.Canceled", err)
	}

	y := newAttemptCtx(pc, 1, false)
	if r := y.cancelQuiet(); r != "boom in Err" {
		t.Fatalf("cancelQuiet returned %v, want the parent's panic", r)
	}
	if err := y.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancelQuiet: Err = %v, want context.Canceled", err)
	}
	if r := y.cancelQuiet(); r != nil {
		t.Fatalf("cancelQuiet of an ended context returned %v", r)
	}
}

// A parent whose Done panics as the attempt's context makes its real one
// leaves the context unlocked: it can still be cancelled (before the fix
// the lock was held for good, and cancel spun for ever).
func TestMaterializeParentDonePanics(t *testing.T) {
	pc := &errPanicCtx{Context: context.Background()}
	pc.doneArmed.Store(true)
	x := newAttemptCtx(pc, 1, false)
	if r := panicked(func() { x.Done() }); r != "boom in Done" {
		t.Fatalf("Done panicked with %v", r)
	}
	if st := x.state.Load(); st != live {
		t.Fatalf("after materialize's panic: state %d, want live and unlocked", st)
	}
	x.cancel()
	if err := x.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", err)
	}
}
