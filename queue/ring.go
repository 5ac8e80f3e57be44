package queue

// ring is a fixed-capacity FIFO of records and, when sizes are tracked, of
// their sizes. It is not safe for concurrent use: Queue guards it with its
// mutex. Removed slots are zeroed so that pointer records can be collected.
type ring[T any] struct {
	buf  []T
	size []int // nil unless the queue limits batch bytes
	head int   // index of the oldest record
	n    int   // records held
}

func newRing[T any](capacity int, sized bool) ring[T] {
	r := ring[T]{buf: make([]T, capacity)}
	if sized {
		r.size = make([]int, capacity)
	}
	return r
}

func (r *ring[T]) full() bool { return r.n == len(r.buf) }

// index returns the slot of the i-th record counted from the oldest.
func (r *ring[T]) index(i int) int {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return j
}

// pushBack appends v as the newest record. The ring must not be full.
func (r *ring[T]) pushBack(v T, size int) {
	j := r.index(r.n)
	r.buf[j] = v
	if r.size != nil {
		r.size[j] = size
	}
	r.n++
}

// pushFront inserts v as the oldest record. The ring must not be full.
func (r *ring[T]) pushFront(v T, size int) {
	r.head--
	if r.head < 0 {
		r.head += len(r.buf)
	}
	r.buf[r.head] = v
	if r.size != nil {
		r.size[r.head] = size
	}
	r.n++
}

// peekSize returns the size of the oldest record (0 when sizes are not
// tracked). The ring must not be empty.
func (r *ring[T]) peekSize() int {
	if r.size == nil {
		return 0
	}
	return r.size[r.head]
}

// popFront removes and returns the oldest record and its size.
func (r *ring[T]) popFront() (T, int) {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	size := 0
	if r.size != nil {
		size = r.size[r.head]
	}
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return v, size
}

// popBack removes the newest record and returns its size.
func (r *ring[T]) popBack() int {
	var zero T
	j := r.index(r.n - 1)
	r.buf[j] = zero
	r.n--
	if r.size != nil {
		return r.size[j]
	}
	return 0
}
