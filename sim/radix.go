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

	// The least event of the lowest non-empty bucket, when known: its
	// bucket and index there.
	known      bool
	lowI, lowJ int
}

func (q *radix) len() int { return q.n }

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
	i := bits.Len64(x) - 1
	q.b[i] = append(q.b[i], it)
	q.mask |= 1 << i
	if q.known {
		switch {
		case i < q.lowI: // the lowest bucket was empty until now
			q.lowI, q.lowJ = i, 0
		case i == q.lowI && k < uint64(q.b[i][q.lowJ].at):
			q.lowJ = len(q.b[i]) - 1
		}
	}
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
	if !q.known {
		i := bits.TrailingZeros64(q.mask)
		bk := q.b[i]
		j := 0
		for k := 1; k < len(bk); k++ {
			if bk[k].at < bk[j].at { // strict: the first of equal times has the lowest sequence
				j = k
			}
		}
		q.known, q.lowI, q.lowJ = true, i, j
	}
	return &q.b[q.lowI][q.lowJ]
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
	q.min()
	i := q.lowI
	bk := q.b[i]
	m := uint64(bk[q.lowJ].at)
	q.last = m
	q.known = false
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
		t := bits.Len64(x) - 1
		q.b[t] = append(q.b[t], bk[j])
		q.mask |= 1 << t
	}
}
