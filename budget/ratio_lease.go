package budget

import (
	"sync"
	"sync/atomic"

	"github.com/stormguard/stormguard/internal/stripe"
)

// Leases.
//
// A Ratio keeps its balance in one word, Ratio.tokens, and changes it with
// compare-and-swap: exact, lock-free, and one cache line that every core
// writing the balance must own in turn. Two cores depositing at full speed
// spend most of their time passing that line back and forth (~60 ns per
// call instead of ~12 on the test machine). So when a cell's goroutines
// keep losing the compare-and-swap, and the balance is far enough from 0
// and from the cap to share, the Ratio lends it out:
//
//   - Ratio.tokens becomes lent, and the balance moves to the lender's
//     reserve (tokens) and space (MaxTokens minus the balance).
//   - A cell that needs a lease takes a share of each from the lender: a
//     lease is some tokens and some free space. Within its lease a cell
//     decides alone, with a compare-and-swap on its own word: a deposit
//     fills the lease's space (there is room for it in the bucket, so the
//     cap cannot apply), a withdrawal or a failure cost spends the lease's
//     tokens (the bucket holds at least those, so the withdrawal is due
//     and the floor of 0 cannot apply). What one spends the other gains:
//     tokens + space of a lease stay constant until the lender takes it
//     back.
//   - A call its cell's lease cannot serve goes to the lender, under a
//     mutex: the reserve and space serve it if they can (the same
//     argument), and the cell's lease is renewed from them.
//   - When they cannot, the answer depends on the whole balance, which is
//     near a limit: the lender takes every lease back (the cells' words
//     become 0, so no cell can decide any more), adds them up, and puts
//     the exact balance back in Ratio.tokens. The call then decides on it
//     with compare-and-swap, as always.
//
// Invariant while lent: reserve + space + the tokens and space of every
// lease = MaxTokens, and the balance = reserve + the tokens of every lease.
// Every decision is made by one atomic step (a compare-and-swap on a cell
// or on Ratio.tokens, or a step under the lender's mutex) on amounts that
// are part of the balance at that instant, and it decides what the whole
// balance would: that is why a Ratio is linearizable. A cell's word is
// nonzero only while the Ratio is lent out, so a compare-and-swap that
// succeeds on a nonzero word acts on a current lease.
//
// A lending that ends soon after it began (the balance was near a limit
// after all) costs more than it saved, so each such ending doubles the
// number of lost compare-and-swaps that start the next one.

const (
	// lent is Ratio.tokens while the balance is lent out.
	lent = -1

	// leaseCap bounds the tokens and the space of a lease, so that both
	// fit a cell's 64-bit word whichever way calls move them.
	leaseCap = 1<<31 - 1

	// leaseShare: a lease takes 1/leaseShare of what the lender holds.
	leaseShare = 4

	// leaseCalls: a lease that cannot serve this many calls is not made.
	leaseCalls = 4

	// lendAfter is the number of lost compare-and-swaps a cell sees before
	// its Ratio tries to lend; it doubles after each short lending, up to
	// lendAfterMax.
	lendAfter    = 8
	lendAfterMax = 1 << 20

	// shortLending: a lending during which the Ratio served fewer calls
	// than this ended too soon to have paid for itself.
	shortLending = 1 << 12
)

// lender holds the part of a Ratio's balance that is not lent to a cell.
type lender struct {
	// reserve is the lender's tokens while the Ratio is lent out, else 0.
	// It is written under mu and read by free retries (see Ratio.take).
	reserve atomic.Int64
	// after is the number of lost compare-and-swaps that starts a lending.
	after atomic.Uint32

	mu sync.Mutex
	// space is the lender's free space (while lent out).
	space int64
	// calls is the Ratio's call count when the lending began.
	calls uint64
}

func unpack(w uint64) (tok, spc int64) { return int64(w >> 32), int64(w & (1<<32 - 1)) }
func pack(tok, spc int64) uint64       { return uint64(tok)<<32 | uint64(spc) }

// add applies delta to the cell's lease if the lease can take it whole: a
// deposit fills its space, a failure cost spends its tokens.
func (c *ratioCell) add(delta int64) bool {
	for {
		w := c.lease.Load()
		tok, spc := unpack(w)
		if delta > 0 && spc < delta || delta < 0 && tok < -delta {
			return false
		}
		if c.lease.CompareAndSwap(w, pack(tok+delta, spc-delta)) {
			return true
		}
	}
}

// take pays cost from the cell's lease if the lease alone holds need.
func (c *ratioCell) take(cost, need int64) bool {
	for {
		w := c.lease.Load()
		tok, spc := unpack(w)
		if tok < need {
			return false
		}
		if cost == 0 || c.lease.CompareAndSwap(w, pack(tok-cost, spc+cost)) {
			return true
		}
	}
}

// calls returns the number of calls the cell has counted.
func (c *ratioCell) calls() uint64 {
	return c.firstOK.Load() + c.firstFailed.Load() + c.retries.Load() + c.granted.Load() + c.refused.Load()
}

// contended is called when a goroutine of cell c lost a compare-and-swap
// on Ratio.tokens.
func (r *Ratio) contended(c *ratioCell) {
	if c.contended.Add(1) < r.lender.after.Load() {
		return
	}
	c.contended.Store(0)
	if r.lender.mu.TryLock() {
		r.lend(false)
		r.lender.mu.Unlock()
	}
}

// lend lends the balance out, if it is not already and (unless force) if
// it is far enough from both limits for a lease to serve a few calls. It
// reports whether the balance is lent out. The lender's mutex is held.
func (r *Ratio) lend(force bool) bool {
	t := r.tokens.Load()
	if t == lent {
		return true
	}
	if !force && r.lease(t-r.p.floor, r.p.tokenUse) == 0 && r.lease(r.p.max-t, r.p.spaceUse) == 0 {
		return false
	}
	if !r.tokens.CompareAndSwap(t, lent) {
		return false
	}
	l := &r.lender
	l.space = r.p.max - t
	l.reserve.Store(t)
	l.calls = r.calls()
	return true
}

// lease returns the size of a lease drawn from have units (tokens or
// space) for calls that use up to use units each: a share of have, or 0 if
// that would not serve leaseCalls such calls.
func (r *Ratio) lease(have, use int64) int64 {
	n := min(have/leaseShare, leaseCap)
	if use == 0 || n < leaseCalls*use {
		return 0
	}
	return n
}

// addLent serves an add its cell's lease could not. It reports false if
// the Ratio was not lent out (any more): the caller starts again.
func (r *Ratio) addLent(c *ratioCell, delta int64) bool {
	l := &r.lender
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.tokens.Load() != lent {
		return false
	}
	reserve := l.reserve.Load()
	if delta > 0 && l.space < delta || delta < 0 && reserve < -delta {
		r.collect()
		return false
	}
	r.renew(c, reserve+delta, l.space-delta)
	return true
}

// takeLent serves a take its cell's lease could not. It reports whether it
// decided: false if the Ratio was not lent out (any more).
func (r *Ratio) takeLent(c *ratioCell, cost, need int64) (granted, decided bool) {
	l := &r.lender
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.tokens.Load() != lent {
		return false, false
	}
	reserve := l.reserve.Load()
	if reserve < need {
		r.collect()
		return false, false
	}
	r.renew(c, reserve-cost, l.space+cost)
	return true, true
}

// renew sets the lender's reserve and space after a call it served, and
// gives cell c a new lease from them. The lender's mutex is held.
func (r *Ratio) renew(c *ratioCell, reserve, space int64) {
	tok, spc := unpack(c.lease.Swap(0))
	reserve += tok
	space += spc
	tok, spc = r.lease(reserve-r.p.floor, r.p.tokenUse), r.lease(space, r.p.spaceUse)
	c.lease.Store(pack(tok, spc))
	r.lender.space = space - spc
	r.lender.reserve.Store(reserve - tok)
}

// collect takes every lease back and puts the exact balance back in
// Ratio.tokens, ending the lending. The lender's mutex is held.
func (r *Ratio) collect() {
	l := &r.lender
	t := l.reserve.Swap(0)
	for i := range stripe.N {
		tok, _ := unpack(r.cells.At(i).lease.Swap(0))
		t += tok
	}
	l.space = 0
	after := l.after.Load()
	if r.calls()-l.calls < shortLending {
		after = min(2*after, lendAfterMax)
	} else {
		after = lendAfter
	}
	l.after.Store(after)
	r.tokens.Store(t)
}

// lentBalance returns the balance while it is lent out (or Ratio.tokens if
// the lending has just ended).
func (r *Ratio) lentBalance() int64 {
	l := &r.lender
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := r.tokens.Load(); t != lent {
		return t
	}
	t := l.reserve.Load()
	for i := range stripe.N {
		tok, _ := unpack(r.cells.At(i).lease.Load())
		t += tok
	}
	return t
}

// calls returns the number of calls the Ratio has counted.
func (r *Ratio) calls() uint64 {
	var n uint64
	for i := range stripe.N {
		n += r.cells.At(i).calls()
	}
	return n
}
