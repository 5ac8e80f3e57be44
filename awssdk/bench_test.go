package awssdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// retryStack is an operation's stack with the SDK's Retry middleware and
// r's middleware whose send fails every first attempt with errFlaky and
// succeeds on the retry, without a network.
func retryStack(tb testing.TB, r *awssdk.Retryer) middleware.Handler {
	return stackFailing(tb, r, "attempt=1;")
}

// stackFailing is retryStack whose send fails the attempts whose
// Amz-Sdk-Request header starts with prefix.
func stackFailing(tb testing.TB, r *awssdk.Retryer, prefix string) middleware.Handler {
	tb.Helper()
	stack := middleware.NewStack("bench", smithyhttp.NewStackRequest)
	if err := stack.Finalize.Add(sdkretry.NewAttemptMiddleware(r, smithyhttp.RequestCloner), middleware.After); err != nil {
		tb.Fatal(err)
	}
	if err := r.AddMiddleware(stack); err != nil {
		tb.Fatal(err)
	}
	send := middleware.HandlerFunc(func(_ context.Context, in any) (any, middleware.Metadata, error) {
		if strings.HasPrefix(in.(*smithyhttp.Request).Header.Get("Amz-Sdk-Request"), prefix) {
			return nil, middleware.Metadata{}, errFlaky
		}
		return nil, middleware.Metadata{}, nil
	})
	return middleware.DecorateHandler(send, stack)
}

// BenchmarkParallelRetry runs operations that retry once after errFlaky,
// the same error value in every goroutine, through the SDK's Retry
// middleware and the Retryer's middleware.
func BenchmarkParallelRetry(b *testing.B) {
	r := awssdk.NewRetryer(&retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Func(func(int, time.Duration) time.Duration { return 0 }),
		Classify:    func(err error) bool { return errors.Is(err, errFlaky) },
	})
	h := retryStack(b, r)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, _, err := h.Handle(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSuccess runs operations whose first attempt succeeds through
// the SDK's Retry middleware and the Retryer's middleware.
func BenchmarkSuccess(b *testing.B) {
	r := awssdk.NewRetryer(&retry.Policy{MaxAttempts: 3})
	h := stackFailing(b, r, "never")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := h.Handle(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}
