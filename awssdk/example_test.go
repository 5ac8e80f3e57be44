package awssdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
)

// Put the AWS SDKs' 2026 rules for DynamoDB, with a quota shared by every
// client, behind each client the aws.Config makes.
func Example() {
	policy := awsretry.Rules{DynamoDB: true}.Policy()
	shared := budget.NewRatio(awsretry.Standard2026()) // or a redisstore budget, shared by the fleet
	policy.Budget = shared
	provider := awssdk.Provider(policy)

	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithRetryer(provider))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := cfg.Retryer().(aws.RetryerV2)
	fmt.Println("attempts:", r.MaxAttempts(), "same retryer for every client:", cfg.Retryer() == r)
	release, err := r.GetRetryToken(context.Background(), fmt.Errorf("connection reset"))
	fmt.Println("retry granted:", err == nil, "quota:", shared.Available())
	_ = release(nil) // the retry succeeded: its 14 tokens come back
	fmt.Println("quota after the retry succeeded:", shared.Available())
	// Output:
	// attempts: 4 same retryer for every client: true
	// retry granted: true quota: 486
	// quota after the retry succeeded: 500
}

// Load an aws.Config whose clients run under the Policy with its
// middleware: exact attempt numbers and CallEnd for the Observer, and the
// Policy's AttemptTimeout and MaxElapsed applied.
func ExampleLoadOptions() {
	policy := awsretry.Rules{DynamoDB: true}.Policy()
	policy.AttemptTimeout = 2 * time.Second
	policy.MaxElapsed = 10 * time.Second
	cfg, err := config.LoadDefaultConfig(context.Background(),
		append(awssdk.LoadOptions(policy), config.WithRegion("us-east-1"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, ok := cfg.Retryer().(*awssdk.Retryer)
	fmt.Println("stormguard retryer:", ok, "middleware options:", len(cfg.APIOptions))
	// Output:
	// stormguard retryer: true middleware options: 1
}
