package sim

import (
	"math/bits"
	"sync"
)

// radix is the Sim's queue of scheduled events: a radix heap, a priority
// queue for keys that never go below the last one taken, as event times
// never go below Now. Its keys are the events' slots, their times
// without the low radixShift bits, read as digits of radixDigit bits.
// Bucket 0 (b0) holds the events of last's slot (last: the time of the
// latest event taken), sorted by (time, sequence); the bucket of level l
// and digit d holds those whose slot differs from last's first in digit
// l (counting from the lowest), which is d there. The next event is the
// head of bucket 0, or else the least of the lowest non-empty bucket
// (the lowest level, then the lowest digit), which taking it spreads
// over the levels below around its slot; a bucket of level 0 holds the
// events of one slot and becomes bucket 0 as it is. An event moves at
// most once per digit of its delay above the slot, and most events not
// at all: level 0 alone spans 2^radixDigit slots (34 ms), where buckets
// of one bit each moved an event once per bit of its delay (issue #36).
//
// Events due at the same time run in sequence order: within every
// bucket, events of equal time lie in sequence order (a push appends the
// highest sequence number, and spreading a bucket keeps its order and
// fills buckets that were empty, being below the lowest non-empty one),
// so a stable sort by time orders the events a spread puts in bucket 0,
// and a push into bucket 0 goes after every event due at or before it.
//
// Looking at the next event (min) moves nothing, so that last is always
// the time of an event taken, at most Now, and every push is at or after
// it.
type radix struct {
	last   uint64
	n      int
	head   int     // the next event of b0
	b0     []qitem // the events of last's slot, in (time, sequence) order, from head
	levels uint64  // bit l set: level l has a non-empty bucket
	// sum[l] bit w set: words[l][w] is not 0; words[l] bit d set: the
	// bucket of level l and digit d is not empty.
	sum   [radixArrays]uint64
	words [radixArrays][radixWords]uint64
	st    *radixStore // the buckets, from radixStores; nil until the first push
	tmp   []qitem     // scratch of sortByTime
}

// radixStore is the radix heap's buckets, kept by radixStores for the
// next Sim once a run is done with them (Sim.release): at 37 KB they
// were a run's largest allocation in the thousands of short runs of
// aws-occ.
type radixStore struct {
	b [radixSlots][]qitem // bucket l*radixWidth+d
	// low[i] is the index in b[i] of its least event (the first of the
	// least time), kept as events arrive so that looking at the next
	// event never searches a bucket.
	low [radixSlots]int32
}

var radixStores sync.Pool // of *radixStore, every bucket empty

const (
	// radixDigit is how many bits of a slot one level of buckets covers.
	radixDigit  = 8
	radixWidth  = 1 << radixDigit                                 // buckets per level
	radixWords  = radixWidth / 64                                 // bitmap words per level
	radixLevels = (64 - radixShift + radixDigit - 1) / radixDigit // levels to cover every slot
	// radixArrays is radixLevels rounded up to a power of two, so that
	// a level's index needs no bounds check.
	radixArrays = 8
	radixSlots  = radixArrays * radixWidth
)

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

// release gives q's buckets, empty, to the next radix heap; q may still
// be used (it takes others), but its pending events are dropped.
func (q *radix) release() {
	if q.st == nil {
		return
	}
	for q.levels != 0 {
		l := bits.TrailingZeros64(q.levels)
		for q.sum[l] != 0 {
			w := bits.TrailingZeros64(q.sum[l])
			for q.words[l][w] != 0 {
				d := bits.TrailingZeros64(q.words[l][w])
				q.words[l][w] &^= 1 << d
				i := l*radixWidth + w*64 + d
				q.st.b[i] = q.st.b[i][:0]
			}
			q.sum[l] &^= 1 << w
		}
		q.levels &^= 1 << l
	}
	radixStores.Put(q.st)
	q.st = nil
	q.n, q.head, q.b0 = 0, 0, q.b0[:0]
}

// add appends it, whose slot is s and differs from last's first in x's
// top bit, to its bucket.
func (q *radix) add(x, s uint64, it qitem) {
	l := uint(bits.Len64(x)-1) / radixDigit
	d := uint(s>>(l*radixDigit&63)) & (radixWidth - 1)
	i := (l*radixWidth + d) & (radixSlots - 1)
	// Appended in place: growing only the length, when it fits, writes
	// no slice header (and no pointer) into the store.
	b := &q.st.b[i]
	*b = append(*b, it)
	bk := *b
	if len(bk) == 1 {
		q.st.low[i] = 0
		q.words[l%radixArrays][d/64] |= 1 << (d % 64)
		q.sum[l%radixArrays] |= 1 << (d / 64)
		q.levels |= 1 << l
	} else if it.at < bk[q.st.low[i]].at { // strict: the first of equal times has the lowest sequence
		q.st.low[i] = int32(len(bk) - 1)
	}
}

// push adds it, whose time must be at or after that of the last event
// taken.
func (q *radix) push(it qitem) {
	q.n++
	s := slot(uint64(it.at))
	x := s ^ slot(q.last)
	if x == 0 {
		q.insert0(it)
		return
	}
	if q.st == nil {
		q.getStore()
	}
	// add, inlined for the pushes (most events are pushed into their
	// level-0 bucket and never move again).
	l := uint(bits.Len64(x)-1) / radixDigit
	d := uint(s>>(l*radixDigit&63)) & (radixWidth - 1)
	i := (l*radixWidth + d) & (radixSlots - 1)
	// Appended in place: growing only the length, when it fits, writes
	// no slice header (and no pointer) into the store.
	b := &q.st.b[i]
	*b = append(*b, it)
	bk := *b
	if len(bk) == 1 {
		q.st.low[i] = 0
		q.words[l%radixArrays][d/64] |= 1 << (d % 64)
		q.sum[l%radixArrays] |= 1 << (d / 64)
		q.levels |= 1 << l
	} else if it.at < bk[q.st.low[i]].at {
		q.st.low[i] = int32(len(bk) - 1)
	}
}

// getStore takes buckets from radixStores, or new ones.
func (q *radix) getStore() {
	q.st, _ = radixStores.Get().(*radixStore)
	if q.st == nil {
		q.st = new(radixStore)
	}
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

// lowest returns the level and index of the lowest non-empty bucket; some
// bucket is not empty.
func (q *radix) lowest() (l, i int) {
	l = bits.TrailingZeros64(q.levels)
	w := bits.TrailingZeros64(q.sum[l])
	return l, l*radixWidth + w*64 + bits.TrailingZeros64(q.words[l][w])
}

// min returns the earliest event by (time, sequence), or nil when the
// queue is empty. The pointer is valid until the next push or pop.
func (q *radix) min() *qitem {
	if q.head < len(q.b0) {
		return &q.b0[q.head]
	}
	if q.levels == 0 {
		return nil
	}
	_, i := q.lowest()
	return &q.st.b[i][q.st.low[i]]
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
// makes bucket 0 of the events of its slot, spreading the others over the
// levels below the bucket's; bucket 0 is empty. A bucket of level 0 holds
// one slot's events: it becomes bucket 0 (bucket 0's empty array goes in
// its place). The events of last's slot land in bucket 0 in the bucket's
// order, which for equal times is sequence order: a stable sort by time
// puts them in (time, sequence) order.
func (q *radix) spread() {
	l, i := q.lowest()
	bk := q.st.b[i]
	m := uint64(bk[q.st.low[i]].at)
	q.last = m
	d := i - l*radixWidth
	if q.words[l][d/64] &^= 1 << (d % 64); q.words[l][d/64] == 0 {
		if q.sum[l] &^= 1 << (d / 64); q.sum[l] == 0 {
			q.levels &^= 1 << l
		}
	}
	if l == 0 {
		q.st.b[i] = q.b0[:0]
		q.b0, q.head = bk, 0
		if len(bk) > 16 {
			q.sortByTime(bk)
		} else {
			insertionByTime(bk) // a few events, and no call
		}
		return
	}
	q.st.b[i] = bk[:0]
	q.b0, q.head = q.b0[:0], 0
	ms := slot(m)
	for j := range bk {
		// Every slot in bk differs from m's below digit l: it lands lower.
		s := slot(uint64(bk[j].at))
		x := s ^ ms
		if x == 0 {
			q.b0 = append(q.b0, bk[j])
			continue
		}
		q.add(x, s, bk[j])
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
