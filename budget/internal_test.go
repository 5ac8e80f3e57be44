package budget

import (
	"errors"
	"math"
	"testing"
)

func TestShareSaturates(t *testing.T) {
	for _, tc := range []struct{ ppm, n, want int64 }{
		{200_000, 10, 2_000_000},
		{0, math.MaxInt64, 0},
		{1e9, 0, 0},
		{1e9, 1e10, math.MaxInt64 / 4},
		{1, math.MaxInt64, math.MaxInt64 / 4},
	} {
		if got := share(tc.ppm, tc.n); got != tc.want {
			t.Errorf("share(%d, %d) = %d, want %d", tc.ppm, tc.n, got, tc.want)
		}
	}
}

// A Ratio lends its balance out after lendAfter lost compare-and-swaps in
// one cell, if a lease would serve a few calls; a lending that ends soon
// doubles the count needed for the next, and a long one resets it.
func TestRatioLendsOnContention(t *testing.T) {
	r := NewRatio(RatioConfig{MaxTokens: 1000, InitialTokens: 500, Refill: 1, RetryCost: 1})
	c := r.cells.At(3)
	for range lendAfter - 1 {
		r.contended(c)
	}
	if r.tokens.Load() == lent {
		t.Fatalf("lent after %d lost compare-and-swaps, want %d", lendAfter-1, lendAfter)
	}
	r.contended(c)
	if r.tokens.Load() != lent {
		t.Fatalf("not lent after %d lost compare-and-swaps", lendAfter)
	}
	if got := r.Available(); got != 500 {
		t.Fatalf("Available() = %v while lent, want 500", got)
	}

	r.lender.mu.Lock()
	r.collect() // at once: a short lending
	r.lender.mu.Unlock()
	if got := r.lender.after.Load(); got != 2*lendAfter {
		t.Fatalf("after a short lending, %d lost compare-and-swaps start the next, want %d", got, 2*lendAfter)
	}
	if got := r.tokens.Load(); got != toUnits(500) {
		t.Fatalf("balance %v after collecting, want 500", fromUnits(got))
	}

	r.lender.mu.Lock()
	r.lend(false)
	r.lender.mu.Unlock()
	for range shortLending / 2 {
		r.record(c, false, nil, 0)
		r.withdraw(c, errors.New("down"))
	}
	r.lender.mu.Lock()
	r.collect()
	r.lender.mu.Unlock()
	if got := r.lender.after.Load(); got != lendAfter {
		t.Fatalf("after a long lending, %d lost compare-and-swaps start the next, want %d", got, lendAfter)
	}
	if got := r.Available(); got != 500 {
		t.Fatalf("Available() = %v after %d deposits and withdrawals of 1, want 500", got, shortLending/2)
	}
}

// A bucket too small to lend a useful lease, or a balance too near its
// limits, stays on the one balance however contended.
func TestRatioDoesNotLendUselessLeases(t *testing.T) {
	for name, c := range map[string]RatioConfig{
		"gRPC, full":                   GRPC(),
		"ten percent, full":            TenPercent(),
		"refill 1 of 10, empty":        {MaxTokens: 10, Refill: 1, StartEmpty: true},
		"retry cost 500, 499.5 of 500": {MaxTokens: 500, InitialTokens: 499.5, RetryCost: 500, Refill: 1},
	} {
		r := NewRatio(c)
		for range 100 * lendAfter {
			r.contended(r.cells.At(0))
		}
		if r.tokens.Load() == lent {
			t.Errorf("%s: lent out", name)
		}
	}
}
