package awssdk

import (
	"context"
	"errors"
	"testing"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/retry"
)

// valErr is an error that is not a pointer (it cannot be held).
type valErr struct{}

func (valErr) Error() string { return "val" }

// TestAttemptEndingAfterItsOperationIsNotHeld (s5 awssdk2, review 3): an
// attempt that ends after its operation (a Finalize middleware between
// the operation middleware and the SDK's Retry middleware returns early
// and leaves the retry loop running) leaves nothing behind: its error
// value is not held for good, nor is the operation counted in wrapping
// for good (a value that cannot be held); it is handed to the SDK as it
// is (s6 aws: not as an attemptError, which the SDK's metrics showed),
// and the Policy's Classify gets the SDK's error.
func TestAttemptEndingAfterItsOperationIsNotHeld(t *testing.T) {
	for _, fail := range []error{errors.New("unique"), valErr{}} {
		held0, wrapping0 := holdCounts()
		var classified []error
		r := NewRetryer(&retry.Policy{MaxAttempts: 2, Classify: func(err error) bool {
			classified = append(classified, err)
			return false
		}})
		stack := middleware.NewStack("abandon", smithyhttp.NewStackRequest)
		if err := stack.Finalize.Add(sdkretry.NewAttemptMiddleware(r, smithyhttp.RequestCloner), middleware.After); err != nil {
			t.Fatal(err)
		}
		if err := r.AddMiddleware(stack); err != nil {
			t.Fatal(err)
		}
		sending, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var loopErr error // the error the abandoned retry loop ended with
		err := stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("abandon",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				go func() {
					defer close(finished)
					_, _, loopErr = next.HandleFinalize(ctx, in)
				}()
				<-sending
				return middleware.FinalizeOutput{}, middleware.Metadata{}, context.DeadlineExceeded
			}), "Retry", middleware.Before)
		if err != nil {
			t.Fatal(err)
		}
		send := middleware.HandlerFunc(func(context.Context, any) (any, middleware.Metadata, error) {
			close(sending)
			<-release
			return nil, middleware.Metadata{}, fail
		})
		if _, _, err := middleware.DecorateHandler(send, stack).Handle(context.Background(), nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%T: the operation ended with %v", fail, err)
		}
		close(release)
		<-finished
		if held, w := holdCounts(); held != held0 || w != wrapping0 {
			t.Errorf("%T: after every operation ended: %d held, %d wrapping, want %d, %d", fail, held, w, held0, wrapping0)
		}
		if len(classified) != 1 || classified[0] != fail {
			t.Errorf("%T: Classify got %v, want the attempt's error once", fail, classified)
		}
		if loopErr != fail {
			t.Errorf("%T: the abandoned loop ended with %T, want the attempt's own error (s6: not an attemptError)", fail, loopErr)
		}
	}
}

// TestHandRacingEndLeavesNothing (s5 awssdk2, review 3): an attempt's
// hand and its operation's end at the same moment (the attempt ending as
// its abandoned operation does) leave nothing held or counted, whichever
// comes first, for a pointer and a non-pointer error, with and without an
// earlier failed attempt of the operation.
func TestHandRacingEndLeavesNothing(t *testing.T) {
	held0, wrapping0 := holdCounts()
	for i := range 2000 {
		op := newOp(1)
		if i%2 == 1 { // an earlier attempt failed: the failure state exists
			_ = hand(op, errors.New("earlier"))
			op.attempts.Store(2)
		}
		var fail error = valErr{}
		if i%4 < 2 {
			fail = errors.New("now")
		}
		start, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			<-start
			_ = hand(op, fail)
		}()
		close(start)
		op.end()
		<-done
		if held, w := holdCounts(); held != held0 || w != wrapping0 {
			t.Fatalf("round %d (%T): %d held, %d wrapping, want %d, %d", i, fail, held, w, held0, wrapping0)
		}
	}
}

// newOp returns an operation that has admitted n attempts.
func newOp(n int32) *operation {
	op := &operation{}
	op.attempts.Store(n)
	return op
}
