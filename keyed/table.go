package keyed

import "sync/atomic"

// table is an open-addressing hash table of entries, read without a lock
// and written under the group's mutex. A removed entry's slot holds the
// group's tombstone until the next rebuild, so that probes pass over it.
// A rebuilt table replaces the old one whole (Group.tab); a reader still
// probing the old one finds what it held, and an entry it finds removed
// is marked dead.
type table[T any] struct {
	mask  uint64
	slots []atomic.Pointer[entry[T]]
	used  int // slots not nil (live entries and tombstones), under the mutex
}

// minSlots is the size of a group's first table.
const minSlots = 16

func newTable[T any](n int) *table[T] {
	size := minSlots
	for size < n {
		size *= 2
	}
	return &table[T]{mask: uint64(size - 1), slots: make([]atomic.Pointer[entry[T]], size)}
}

// find returns the entry of key, whose hash is h, or nil. The tombstone's
// key is "" and the group never looks "" up, so it never matches.
func (t *table[T]) find(h uint64, key string) *entry[T] {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil
		}
		if e.h == h && e.key == key {
			return e
		}
	}
}

// full reports whether adding one entry would fill more than 3/4 of t.
func (t *table[T]) full() bool { return (t.used+1)*4 > len(t.slots)*3 }

// put adds e, which t does not hold and which fits (!full).
func (t *table[T]) put(e *entry[T]) {
	for i := e.h & t.mask; ; i = (i + 1) & t.mask {
		if t.slots[i].Load() == nil {
			t.slots[i].Store(e)
			t.used++
			return
		}
	}
}

// remove replaces e's slot with tomb.
func (t *table[T]) remove(e, tomb *entry[T]) {
	for i := e.h & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].Load() {
		case e:
			t.slots[i].Store(tomb)
			return
		case nil:
			return
		}
	}
}
