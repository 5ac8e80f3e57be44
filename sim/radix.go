package sim

import "math/bits"

// The radix heap's digits: a key is read as radixLevels digits of
// radixBits bits, lowest first.
const (
	radixBits   = 6
	radixSlots  = 1 << radixBits
	radixLevels = (64 + radixBits - 1) / radixBits
)

// radix is the Sim's queue of scheduled events: a radix heap with 64-way
// digits (a hierarchical timing wheel), a priority queue for keys that
// never go below the last one taken, as event times never go below Now.
// Keys are the events' times, read as digits of 6 bits.
//
// An event whose time differs from last (the time of the latest event
// taken) first in digit L, with digit value d there, lies in slot d of
// level L. Every time at level L is below every time at level L+1, and
// within a level slots are in time order. A slot of level 0 holds events
// of one time only (they share every digit), so taking events from it
// needs neither a search nor a move: the next event is the head of the
// lowest non-empty slot of level 0. When level 0 is empty, the lowest
// non-empty slot of the lowest level is searched for its least time,
// last moves there, and the slot is spread over the levels below, which
// are empty: an event moves at most once per level it goes down (a
// 10ms delay is at level 3, so at most three moves), where a radix heap
// with 1-bit digits moves it once per bit.
//
// Events due at the same time run in sequence order, and no sort is
// needed for it: within every slot, events of equal time lie in sequence
// order. A push appends the highest sequence number, and spreading a slot
// keeps its order and fills slots that were empty (they are below the
// lowest non-empty one).
//
// Looking at the next event (min) moves nothing, so that last is always
// the time of an event taken, at most Now, and every push is at or after
// it.
type radix struct {
	last uint64
	n    int
	// head is the next event of the level-0 slot of last's own time (the
	// one being taken from); every other slot is taken from its start.
	head   int
	levels uint16              // bit L set: level L has a non-empty slot
	mask   [radixLevels]uint64 // bit d of mask[L] set: slot d of level L is not empty
	b      [radixLevels][radixSlots][]qitem

	// The least event of the lowest non-empty slot above level 0, when
	// known: its level, slot and index there.
	known            bool
	lowL, lowD, lowJ int
}

func (q *radix) len() int { return q.n }

// place returns the level and slot of key k relative to last.
func (q *radix) place(k uint64) (level, slot int) {
	x := k ^ q.last
	if x < radixSlots {
		return 0, int(k & (radixSlots - 1))
	}
	level = (bits.Len64(x) - 1) / radixBits
	return level, int(k>>(uint(level)*radixBits)) & (radixSlots - 1)
}

// push adds it, whose time must be at or after that of the last event
// taken.
func (q *radix) push(it qitem) {
	q.n++
	k := uint64(it.at)
	l, d := q.place(k)
	s := append(q.b[l][d], it)
	q.b[l][d] = s
	q.mask[l] |= 1 << d
	q.levels |= 1 << l
	if q.known && l > 0 {
		switch {
		case l < q.lowL || l == q.lowL && d < q.lowD: // that slot was empty until now
			q.lowL, q.lowD, q.lowJ = l, d, 0
		case l == q.lowL && d == q.lowD && k < uint64(s[q.lowJ].at):
			q.lowJ = len(s) - 1
		}
	}
}

// min returns the earliest event by (time, sequence), or nil when the
// queue is empty. The pointer is valid until the next push or pop.
func (q *radix) min() *qitem {
	if q.levels&1 != 0 {
		d := bits.TrailingZeros64(q.mask[0])
		if uint64(d) == q.last&(radixSlots-1) {
			return &q.b[0][d][q.head]
		}
		return &q.b[0][d][0]
	}
	if q.levels == 0 {
		return nil
	}
	if !q.known {
		q.findLow()
	}
	return &q.b[q.lowL][q.lowD][q.lowJ]
}

// findLow finds the least event of the lowest non-empty slot, level 0
// being empty.
func (q *radix) findLow() {
	l := bits.TrailingZeros16(q.levels)
	d := bits.TrailingZeros64(q.mask[l])
	bk := q.b[l][d]
	j := 0
	for k := 1; k < len(bk); k++ {
		if bk[k].at < bk[j].at { // strict: the first of equal times has the lowest sequence
			j = k
		}
	}
	q.known, q.lowL, q.lowD, q.lowJ = true, l, d, j
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *radix) pop() qitem {
	if q.levels&1 == 0 {
		q.spread()
	}
	d := bits.TrailingZeros64(q.mask[0])
	if uint64(d) != q.last&(radixSlots-1) {
		// The slot of last's time is empty (head is 0): move on to d's.
		q.last = q.last&^(radixSlots-1) | uint64(d)
	}
	s := q.b[0][d]
	it := s[q.head]
	q.head++
	q.n--
	if q.head == len(s) {
		q.b[0][d], q.head = s[:0], 0
		if q.mask[0] &^= 1 << d; q.mask[0] == 0 {
			q.levels &^= 1
		}
	}
	return it
}

// spread moves last to the time of the least event of the lowest
// non-empty slot and spreads that slot over the levels below it; level 0
// is empty.
func (q *radix) spread() {
	if !q.known {
		q.findLow()
	}
	l, d := q.lowL, q.lowD
	bk := q.b[l][d]
	m := uint64(bk[q.lowJ].at)
	q.last = m
	q.head = 0
	q.known = false
	q.b[l][d] = bk[:0]
	if q.mask[l] &^= 1 << d; q.mask[l] == 0 {
		q.levels &^= 1 << l
	}
	for j := range bk {
		// Every time in bk differs from m only below level l: it lands
		// lower.
		tl, td := q.place(uint64(bk[j].at))
		q.b[tl][td] = append(q.b[tl][td], bk[j])
		q.mask[tl] |= 1 << td
		q.levels |= 1 << tl
	}
}
