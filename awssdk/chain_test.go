package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// chain describes err's chain: each error's type, depth first, then its
// text.
func chain(err error) string {
	var b strings.Builder
	var walk func(error, int)
	walk = func(e error, depth int) {
		for e != nil {
			fmt.Fprintf(&b, "%s%T\n", strings.Repeat(" ", depth), e)
			if m, ok := e.(interface{ Unwrap() []error }); ok {
				for _, x := range m.Unwrap() {
					walk(x, depth+1)
				}
				return
			}
			e = errors.Unwrap(e)
		}
	}
	walk(err, 0)
	if err != nil {
		b.WriteString(err.Error())
	}
	return b.String()
}

// refuseAll is a Budget that refuses every retry.
type refuseAll struct{}

func (refuseAll) Withdraw(error) bool { return false }
func (refuseAll) Record(bool, error)  {}

// TestMiddlewareKeepsTheSDKErrorChain (s4 aws 1): the attempt middleware
// hands the SDK an error of each attempt's own; the caller must still get
// exactly the SDK's error chain, the same types and text as without the
// middleware, for attempts exhausted, a refused retry (errors.Join), an
// error the SDK marks as clock skew, an error not retried, and in the
// attempt results of a call that succeeded after a retry; and
// smithy.APIError and *smithyhttp.ResponseError are found in it.
func TestMiddlewareKeepsTheSDKErrorChain(t *testing.T) {
	e := newEndpoint(t)
	skew := reply{status: 400, errType: "InvalidSignatureException", skewed: true}
	validation := reply{status: 400, errType: "ValidationException"}
	cases := []struct {
		name   string
		script []reply
		budget retry.Budget
		fails  bool
	}{
		{"attempts exhausted", []reply{internal, internal, internal}, nil, true},
		{"budget refuses", []reply{throttling}, refuseAll{}, true},
		{"clock skew then exhausted", []reply{skew, skew, skew}, nil, true},
		{"not retried", []reply{internal, validation}, nil, true},
		{"a retry succeeds", []reply{internal, throttling, ok200}, nil, false},
	}
	for _, tc := range cases {
		var classified []string // the chains the Policy's Classify saw
		run := func(withMiddleware bool) (string, []string) {
			classified = nil
			clk := clocktest.NewFake()
			policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
			policy.Clock, policy.Observer = clk, &events{}
			classify := policy.Classify
			if classify == nil {
				classify = awsretry.IsRetryable
			}
			policy.Classify = func(err error) bool {
				classified = append(classified, chain(err))
				return classify(err)
			}
			if tc.budget != nil {
				policy.Budget = tc.budget
			}
			r := awssdk.NewRetryer(policy)
			opts := []func(*config.LoadOptions) error{config.WithRetryer(func() aws.Retryer { return &sleepless{clk: clk, RetryerV2: r} })}
			if withMiddleware {
				opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
			}
			c := e.client(t, opts...)
			var err error
			var out *dynamodb.GetItemOutput
			e.play(tc.script, func() {
				out, err = c.GetItem(context.Background(), &dynamodb.GetItemInput{
					TableName: aws.String("t"),
					Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
				})
			})
			if (err != nil) != tc.fails {
				t.Fatalf("%s: error %v, want failure %v", tc.name, err, tc.fails)
			}
			var results []string
			if out != nil {
				res, _ := sdkretry.GetAttemptResults(out.ResultMetadata)
				for _, a := range res.Results {
					results = append(results, chain(a.Err))
				}
			}
			if err != nil {
				var apiErr smithy.APIError
				var respErr *smithyhttp.ResponseError
				if !errors.As(err, &apiErr) || !errors.As(err, &respErr) {
					t.Errorf("%s: %v: no smithy.APIError or *smithyhttp.ResponseError in the chain", tc.name, err)
				}
			}
			return chain(err), results
		}
		wantErr, wantResults := run(false)
		wantClassified := classified
		gotErr, gotResults := run(true)
		if fmt.Sprint(classified) != fmt.Sprint(wantClassified) || strings.Contains(fmt.Sprint(classified), "attemptError") {
			t.Errorf("%s: with the middleware Classify saw\n%q\nwithout\n%q", tc.name, classified, wantClassified)
		}
		if gotErr != wantErr {
			t.Errorf("%s: with the middleware the error chain is\n%s\nwithout\n%s", tc.name, gotErr, wantErr)
		}
		if fmt.Sprint(gotResults) != fmt.Sprint(wantResults) {
			t.Errorf("%s: with the middleware the attempt results are\n%q\nwithout\n%q", tc.name, gotResults, wantResults)
		}
		if strings.Contains(gotErr+fmt.Sprint(gotResults), "attemptError") {
			t.Errorf("%s: the middleware's attempt error reached the caller", tc.name)
		}
	}
}
