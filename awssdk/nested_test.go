package awssdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
)

// TestNestedCallKeepsTheOuterAttemptAlive (outside review r2aws): an SDK
// call made inside an attempt (a credentials provider's, such as STS
// AssumeRole) by a client with the middleware and no AttemptTimeout,
// whose send adds no attempt control of its own, must not hand the OUTER
// attempt's end to its own response body: the SDK closes that body once
// it is deserialized, which cancelled the outer attempt before it was
// sent. Both the nested client's attempts its Retryer admitted (sent
// with an attemptContext) and those it did not (the SDK's standard
// retryer with the Retryer's middleware in the stack) are checked.
func TestNestedCallKeepsTheOuterAttemptAlive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nested func(t *testing.T, e *endpoint) *dynamodb.Client
	}{
		{"nested Retryer", func(t *testing.T, e *endpoint) *dynamodb.Client {
			return e.client(t, awssdk.LoadOptions(awsretry.Rules{}.Policy())...) // no AttemptTimeout
		}},
		{"nested standard retryer with the middleware", func(t *testing.T, e *endpoint) *dynamodb.Client {
			r := awssdk.NewRetryer(awsretry.Rules{}.Policy()) // no AttemptTimeout
			return e.client(t, config.WithRetryer(func() aws.Retryer { return sdkretry.NewStandard() }),
				config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t)
			nested := tc.nested(t, e)
			outerPolicy := awsretry.Rules{}.Policy()
			outerPolicy.AttemptTimeout = 5 * time.Second // a long bound: it never fires here
			outer := awssdk.NewRetryer(outerPolicy)
			o := e.withMiddleware(t, outer, outer).Options()
			var nestedErr error
			o.Credentials = aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
				nestedErr = getItemCtx(ctx, nested) // with the attempt's context, as GetIdentity is called
				return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nestedErr
			})
			c := dynamodb.New(o)
			var err error
			n := e.play([]reply{ok200, ok200}, func() { err = getItemCtx(context.Background(), c) })
			if nestedErr != nil {
				t.Fatalf("nested call: %v", nestedErr)
			}
			if err != nil {
				t.Errorf("outer call failed after a nested call inside its attempt: %v", err)
			}
			if n != 2 {
				t.Errorf("%d requests, want 2 (the nested call's, then the outer attempt's)", n)
			}
		})
	}
}
