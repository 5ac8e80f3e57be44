package budget

import "github.com/stormguard/stormguard/internal/stripe"

// Hooks for the tests of package budget_test, to drive a Ratio's leases
// deterministically.

// RatioCells is the number of cells of a Ratio.
const RatioCells = stripe.N

// RecordAt and WithdrawAt call Record and Withdraw as a goroutine of
// cell i would.
func RecordAt(r *Ratio, i int, retry bool, err error) {
	r.record(r.cells.At(i), retry, err, r.p.retryCost)
}
func WithdrawAt(r *Ratio, i int, err error) bool {
	_, ok := r.withdraw(r.cells.At(i), err)
	return ok
}

// Lend lends r's balance out, however near a limit it is.
func Lend(r *Ratio) {
	r.lender.mu.Lock()
	defer r.lender.mu.Unlock()
	r.lend(true)
}

// Collect ends r's lending, if it is lent out.
func Collect(r *Ratio) {
	r.lender.mu.Lock()
	defer r.lender.mu.Unlock()
	if r.tokens.Load() == lent {
		r.collect()
	}
}

// SetLease gives cell i of a lent-out r a lease of the given shares of the
// lender's tokens and space (after taking the cell's lease back).
func SetLease(r *Ratio, i int, tokenShare, spaceShare float64) {
	l := &r.lender
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.tokens.Load() != lent {
		return
	}
	c := r.cells.At(i)
	tok, spc := unpack(c.lease.Swap(0))
	reserve, space := l.reserve.Load()+tok, l.space+spc
	tok = min(int64(float64(reserve)*tokenShare), leaseCap)
	spc = min(int64(float64(space)*spaceShare), leaseCap)
	c.lease.Store(pack(tok, spc))
	l.space = space - spc
	l.reserve.Store(reserve - tok)
}
