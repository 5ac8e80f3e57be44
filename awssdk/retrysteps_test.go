package awssdk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

var errSame = errors.New("same")

// BenchmarkRetrySteps makes, in parallel, the Retryer's calls of one
// failed attempt and its retry as the SDK's Retry middleware makes them
// (GetAttemptToken, the attempt middleware, the release,
// IsErrorRetryable, GetRetryToken, RetryDelay), every goroutine failing
// with the same error value, without the rest of the SDK's stack.
func BenchmarkRetrySteps(b *testing.B) {
	r := NewRetryer(&retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Func(func(int, time.Duration) time.Duration { return time.Millisecond }),
		Classify:    func(err error) bool { return errors.Is(err, errSame) },
	})
	send := middleware.FinalizeHandlerFunc(func(context.Context, middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, errSame
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op := &operation{}
			ctx := context.WithValue(context.Background(), operationKey{}, op)
			op.ctx = ctx
			release, err := r.GetAttemptToken(ctx)
			if err != nil {
				b.Fatal(err)
			}
			_, _, err = attemptMiddleware{r}.HandleFinalize(ctx, middleware.FinalizeInput{}, send)
			_ = release(err)
			if !r.IsErrorRetryable(err) {
				b.Fatal("not retryable")
			}
			rel, terr := r.GetRetryToken(ctx, err)
			if terr != nil {
				b.Fatal(terr)
			}
			if d, _ := r.RetryDelay(1, err); d != time.Millisecond {
				b.Fatalf("delay %v", d)
			}
			_ = rel(nil)
			op.end()
		}
	})
}
