package sim

import "math/bits"

// radix is the Sim's queue of scheduled events: a radix heap, a priority
// queue for keys that never go below the last one taken, as event times
// never go below Now. Its keys are the events' slots, their times
// without the low radixShift bits. Bucket 0 holds the events of last's
// slot (last: the time of the latest event taken), sorted by (time,
// sequence); bucket i+1 (b[i]) holds those whose slot differs from last's
// first in bit i. The next event is the head of bucket 0, or else the
// least of the lowest non-empty bucket, which taking it spreads over the
// buckets below around its slot: an event moves at most once per bit of
// its delay above the slot, and usually a few times, where a binary heap
// sifts through every level at each pop.
//
// Events due at the same time run in sequence order: within every bucket
// but 0, events of equal time lie in sequence order (a push appends the
// highest sequence number, and spreading a bucket keeps its order and
// fills buckets that were empty, being below the lowest non-empty one),
// so a stable sort by time orders the events a spread puts in bucket 0,
// and a push into bucket 0 goes after every event due at or before it.
//
// Looking at the next event (min) moves nothing, so that last is always
// the time of an event taken, at most Now, and every push is at or after
// it.
type radix struct {
	last uint64
	n    int
	mask uint64      // bit i set: b[i] is not empty
	head int         // the next event of b0
	b0   []qitem     // the events of last's slot, in (time, sequence) order, from head
	b    [64][]qitem // b[i]: events whose slot ^ last's slot has its top bit at i
	// low[i] is the index in b[i] of its least event (the first of the
	// least time), kept as events arrive so that looking at the next
	// event never searches a bucket.
	low [64]int32
	tmp []qitem // scratch of sortByTime
}

func (q *radix) len() int { return q.n }

// radixShift is how many low bits of an event's time the buckets ignore:
// they are keyed by the time's slot of 2^radixShift ns, and bucket 0
// holds the events of last's slot, kept in (time, sequence) order. A
// slot (131 µs) holds a few events, and an event no longer moves through
// a level for each bit of its delay below the slot (issue #36: 4 to 7% fewer instructions
// for a trial of the cascade and packet-loss scenarios than keys of
// whole nanoseconds, and fewer than slots of 2^16 or 2^18 ns).
const radixShift = 17

// slot returns the radix key of time k.
func slot(k uint64) uint64 { return k >> radixShift }

// add appends it, whose time is k, to bucket i.
func (q *radix) add(i int, k uint64, it qitem) {
	bk := append(q.b[i], it)
	q.b[i] = bk
	switch {
	case q.mask&(1<<i) == 0:
		q.low[i] = 0
		q.mask |= 1 << i
	case k < uint64(bk[q.low[i]].at): // strict: the first of equal times has the lowest sequence
		q.low[i] = int32(len(bk) - 1)
	}
}

// push adds it, whose time must be at or after that of the last event
// taken.
func (q *radix) push(it qitem) {
	q.n++
	k := uint64(it.at)
	x := slot(k) ^ slot(q.last)
	if x == 0 {
		q.insert0(it)
		return
	}
	q.add(bits.Len64(x)-1, k, it)
}

// insert0 adds it to bucket 0 in its place: after every event due at or
// before it (its sequence number is the highest).
func (q *radix) insert0(it qitem) {
	b := append(q.b0, it)
	j := len(b) - 1
	for j > q.head && b[j-1].at > it.at {
		b[j] = b[j-1]
		j--
	}
	b[j] = it
	q.b0 = b
}

// min returns the earliest event by (time, sequence), or nil when the
// queue is empty. The pointer is valid until the next push or pop.
func (q *radix) min() *qitem {
	if q.head < len(q.b0) {
		return &q.b0[q.head]
	}
	if q.mask == 0 {
		return nil
	}
	i := bits.TrailingZeros64(q.mask)
	return &q.b[i][q.low[i]]
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *radix) pop() qitem {
	if q.head >= len(q.b0) {
		q.spread()
	}
	it := q.b0[q.head]
	q.head++
	q.n--
	if q.head == len(q.b0) {
		q.b0, q.head = q.b0[:0], 0
	}
	return it
}

// spread moves last to the time of the lowest bucket's least event and
// spreads that bucket over the ones below it; bucket 0 is empty. The
// events of last's slot land in bucket 0 in the bucket's order, which
// for equal times is sequence order: a stable sort by time puts them in
// (time, sequence) order.
func (q *radix) spread() {
	i := bits.TrailingZeros64(q.mask)
	bk := q.b[i]
	m := uint64(bk[q.low[i]].at)
	q.last = m
	ms := slot(m)
	q.mask &^= 1 << i
	q.b[i] = bk[:0]
	q.b0, q.head = q.b0[:0], 0
	for j := range bk {
		// Every slot in bk differs from m's below bit i: it lands lower.
		k := uint64(bk[j].at)
		x := slot(k) ^ ms
		if x == 0 {
			q.b0 = append(q.b0, bk[j])
			continue
		}
		q.add(bits.Len64(x)-1, k, bk[j])
	}
	q.sortByTime(q.b0)
}

// sortByTime sorts b by time, keeping the order of equal times:
// insertion sort for a few events, else a merge sort through q's scratch
// buffer (no allocation once it has grown).
func (q *radix) sortByTime(b []qitem) {
	if len(b) <= 16 {
		insertionByTime(b)
		return
	}
	// Runs of 8 by insertion, then merged bottom-up, back and forth
	// between b and the scratch buffer.
	const run = 8
	for i := 0; i < len(b); i += run {
		insertionByTime(b[i:min(i+run, len(b))])
	}
	if cap(q.tmp) < len(b) {
		q.tmp = make([]qitem, len(b), 2*len(b))
	}
	src, dst := b, q.tmp[:len(b)]
	for w := run; w < len(b); w *= 2 {
		for lo := 0; lo < len(b); lo += 2 * w {
			mid, hi := min(lo+w, len(b)), min(lo+2*w, len(b))
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if src[j].at < src[i].at { // strict: the left one first on ties
					dst[k] = src[j]
					j++
				} else {
					dst[k] = src[i]
					i++
				}
				k++
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
		}
		src, dst = dst, src
	}
	if &src[0] != &b[0] {
		copy(b, src)
	}
}

// insertionByTime sorts b by time, keeping the order of equal times.
func insertionByTime(b []qitem) {
	for i := 1; i < len(b); i++ {
		it := b[i]
		j := i
		for j > 0 && b[j-1].at > it.at {
			b[j] = b[j-1]
			j--
		}
		b[j] = it
	}
}
