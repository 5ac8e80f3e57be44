package sim

import "math/bits"

// radix is the Sim's queue of scheduled events: a radix heap, a priority
// queue for keys that never go below the last one taken, as event times
// never go below Now. Keys are the events' times. Bucket 0 holds the
// events due at last, the time of the latest event taken, in sequence
// order; bucket i+1 (b[i]) holds those whose time differs from last first
// in bit i. The next event is the head of bucket 0, or else the least of
// the lowest non-empty bucket, which taking it spreads over the buckets
// below around its time: an event moves at most once per bit of its
// delay, and usually a few times, where a binary heap sifts through every
// level at each pop.
//
// Events due at the same time run in sequence order, and no sort is
// needed for it: within every bucket, events of equal time lie in
// sequence order. A push appends the highest sequence number, and
// spreading a bucket keeps its order and fills buckets that were empty
// (they are below the lowest non-empty one).
//
// Looking at the next event (min) moves nothing, so that last is always
// the time of an event taken, at most Now, and every push is at or after
// it.
type radix struct {
	last uint64
	n    int
	mask uint64      // bit i set: b[i] is not empty
	head int         // the next event of b0
	b0   []qitem     // events due at last, in sequence order, from head
	b    [64][]qitem // b[i]: events whose time ^ last has its top bit at i
	// low[i] is the index in b[i] of its least event (the first of the
	// least time), kept as events arrive so that looking at the next
	// event never searches a bucket.
	low [64]int32
}

func (q *radix) len() int { return q.n }

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
	x := k ^ q.last
	if x == 0 {
		q.b0 = append(q.b0, it)
		return
	}
	q.add(bits.Len64(x)-1, k, it)
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
// spreads that bucket over the ones below it; bucket 0 is empty.
func (q *radix) spread() {
	i := bits.TrailingZeros64(q.mask)
	bk := q.b[i]
	m := uint64(bk[q.low[i]].at)
	q.last = m
	q.mask &^= 1 << i
	q.b[i] = bk[:0]
	q.b0, q.head = q.b0[:0], 0
	for j := range bk {
		// Every time in bk differs from m below bit i: it lands lower.
		k := uint64(bk[j].at)
		x := k ^ m
		if x == 0 {
			q.b0 = append(q.b0, bk[j])
			continue
		}
		q.add(bits.Len64(x)-1, k, bk[j])
	}
}
