package awsretry

import "github.com/stormguard/stormguard/budget"

// Standard2026 returns the retry quota of the AWS SDKs' standard retry
// mode as revised in 2026 (the SDKs' "new retries 2026", SEP 2.1), for
// budget.NewRatio: a bucket of 500 tokens that starts full; a retry costs
// 14 tokens, or 5 after a throttling answer (IsThrottle, through
// Throttles); a successful first attempt adds 1 (NoRetryIncrement); a
// successful retry gives back the cost it paid (5 or 14: retry.Do and
// retry.Call report it through RecordPriced, see
// budget.RatioConfig.RefundRetrySuccess); a retry is refused when its cost
// cannot be paid. Timeouts pay the 14 of any other retry
// (aws-sdk-dotnet's 2026 CapacityManager keeps a timeout cost of 10; the
// aws-sdk-go-v2 conformance table this package follows does not test
// timeouts). Rules builds the complete policy around it.
func Standard2026() budget.RatioConfig {
	return budget.RatioConfig{
		MaxTokens:          500,
		Refill:             1,
		RetryCost:          14,
		ThrottleCost:       5,
		RefundRetrySuccess: true,
		Throttles:          Throttles{},
	}
}

// StandardLegacy returns the retry quota of the AWS SDKs' standard retry
// mode before 2026, for budget.NewRatio: a bucket of 500 tokens that
// starts full; a retry costs 5, or 10 after a timeout
// (budget.IsTimeout); a successful first attempt adds 1 and a successful
// retry gives back the cost it paid (5 or 10, see
// budget.RatioConfig.RefundRetrySuccess); a retry is refused when its
// cost cannot be paid. LegacyRules builds the complete policy around it.
func StandardLegacy() budget.RatioConfig {
	return budget.RatioConfig{
		MaxTokens:          500,
		Refill:             1,
		RetryCost:          5,
		TimeoutCost:        10,
		RefundRetrySuccess: true,
		Throttles:          Throttles{},
	}
}

// Throttles is the AWS throttle rule as a budget.ThrottleRule: its
// IsThrottle method is IsThrottle (the AWS throttling error codes, the
// retry package's throttle facts and HTTP 429). Standard2026 and
// StandardLegacy set it as budget.RatioConfig.Throttles, so that a Ratio
// (or a redisstore shared bucket) charges ThrottleCost after the answers
// the AWS SDKs call throttles. It is an empty struct, so a RatioConfig
// holding it stays comparable with ==.
type Throttles struct{}

// IsThrottle reports IsThrottle(err). It implements budget.ThrottleRule.
func (Throttles) IsThrottle(err error) bool { return IsThrottle(err) }
