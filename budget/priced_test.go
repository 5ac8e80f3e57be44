package budget_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// TestDoThrottledRetryRefundsWhatItPaid (issue 31 item 18): through
// retry.Do, a call throttled once that then succeeds leaves the 2026 quota
// where it was: it paid 5 and gets 5 back (it got 14 back, 100 → 109).
// Item 19: a legacy retry after a timeout pays 10 and gets 10 back (it got
// 5 back, 500 → 495).
func TestDoThrottledRetryRefundsWhatItPaid(t *testing.T) {
	throttled := awsResponse{status: 400, code: "ThrottlingException"}.err()
	timedOut := fmt.Errorf("read: %w", retry.ErrAttemptTimeout)
	for _, tc := range []struct {
		name      string
		policy    *retry.Policy
		quota     budget.RatioConfig
		initial   float64
		first     error
		mid, want float64
	}{
		{"2026 throttle", budget.AWSRules{}.Policy(), budget.AWSStandard2026(), 100, throttled, 95, 100},
		{"2026 transient", budget.AWSRules{}.Policy(), budget.AWSStandard2026(), 100, awsResponse{status: 503}.err(), 86, 100},
		{"legacy timeout", budget.AWSLegacyRules{}.Policy(), budget.AWSStandardLegacy(), 0, timedOut, 490, 500},
		{"legacy transient", budget.AWSLegacyRules{}.Policy(), budget.AWSStandardLegacy(), 0, awsResponse{status: 500}.err(), 495, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.quota.InitialTokens = tc.initial
			b := budget.NewRatio(tc.quota)
			p := tc.policy
			p.Budget = b
			p.Backoff = backoff.Constant{}
			n := 0
			var mid float64
			_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
				n++
				if n == 1 {
					return 0, tc.first
				}
				mid = b.Available()
				return 1, nil
			})
			if err != nil || n != 2 {
				t.Fatalf("err %v after %d attempts", err, n)
			}
			if mid != tc.mid || b.Available() != tc.want {
				t.Fatalf("quota %v during the retry and %v after, want %v and %v", mid, b.Available(), tc.mid, tc.want)
			}
		})
	}
}

// TestRatioRecordPriced: RecordPriced gives back the price it is handed,
// within [0, MaxTokens]; plain Record still gives back RetryCost, the only
// cost it can know.
func TestRatioRecordPriced(t *testing.T) {
	b := budget.NewRatio(budget.RatioConfig{MaxTokens: 100, InitialTokens: 50, RetryCost: 14, ThrottleCost: 5, RefundRetrySuccess: true})
	throttled := awsResponse{status: 429}.err()
	price, ok := b.WithdrawPriced(throttled)
	if !ok || price != 5e6 || b.Available() != 45 {
		t.Fatalf("WithdrawPriced: %v %v, quota %v", price, ok, b.Available())
	}
	b.RecordPriced(throttled, price) // a failed retry gives nothing back
	if b.Available() != 45 {
		t.Fatalf("after a failed priced retry: %v", b.Available())
	}
	b.RecordPriced(nil, price)
	if b.Available() != 50 {
		t.Fatalf("after a successful priced retry: %v, want 50", b.Available())
	}
	b.RecordPriced(nil, -7)
	if b.Available() != 50 {
		t.Fatalf("a negative price changed the quota: %v", b.Available())
	}
	b.RecordPriced(nil, 1<<62)
	if b.Available() != 100 {
		t.Fatalf("a huge price: %v, want the cap 100", b.Available())
	}
	if _, ok := b.WithdrawPriced(throttled); !ok {
		t.Fatal("refused")
	}
	b.Record(true, nil) // unpriced: RetryCost
	if b.Available() != 100 {
		t.Fatalf("unpriced refund: %v", b.Available())
	}
	b = budget.NewRatio(budget.RatioConfig{MaxTokens: 100, InitialTokens: 50, RetryCost: 14, ThrottleCost: 5, RefundRetrySuccess: true})
	b.WithdrawPriced(throttled)
	b.Record(true, nil)
	if b.Available() != 59 {
		t.Fatalf("unpriced refund: %v, want 59 (RetryCost back)", b.Available())
	}
	var nilRatio *budget.Ratio
	if price, ok := nilRatio.WithdrawPriced(throttled); !ok || price != 0 {
		t.Fatal("a nil Ratio must grant at no cost")
	}
	nilRatio.RecordPriced(nil, 5)
	if got := b.Stats(); got.Retries != 1 || got.Granted != 1 {
		t.Fatalf("stats %+v", got)
	}
}
