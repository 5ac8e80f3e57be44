package budget_test

import (
	"strconv"
	"testing"

	"github.com/stormguard/stormguard/budget"
)

// statusErr is an answer's HTTP status, reported as a retry.StatusReporter
// (as an adapter's error reports it).
type statusErr int

func (e statusErr) Error() string       { return "status " + strconv.Itoa(int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

// TestRatioRecordPriced: RecordPriced gives back the price it is handed,
// within [0, MaxTokens]; plain Record still gives back RetryCost, the only
// cost it can know.
func TestRatioRecordPriced(t *testing.T) {
	b := budget.NewRatio(budget.RatioConfig{MaxTokens: 100, InitialTokens: 50, RetryCost: 14, ThrottleCost: 5, RefundRetrySuccess: true})
	var throttled error = statusErr(429)
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
