// Package labels bounds the label values that the metrics modules
// (promretry/, otelretry/) make from user-given names, operations and queues:
// a name becomes a valid value, and past a maximum new names share one
// overflow value, so names built from request data cannot explode the
// series count.
package labels

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

const (
	// Overflow is the label value the names beyond a Table's maximum share.
	Overflow = "_other"
	// Unnamed is the label value of the empty name.
	Unnamed = "unnamed"
)

// Table gives each name the value kept for its label, creating the value
// the first time a label is seen. A name seen before costs one map read
// without locking. The zero Table is not usable; make one with New.
type Table[V any] struct {
	max      int
	newValue func(label string) V          // called under mu
	overflow func(name string, shared V) V // called under mu; may be nil

	// names maps a raw name to its value. Readers load the map without
	// locking; writers copy it under mu.
	names atomic.Pointer[map[string]V]

	mu      sync.Mutex
	byLabel map[string]V // max names, then Overflow
}

// New returns a Table of at most max label values made from names, and
// Overflow for the names after those; newValue makes the value of a new label. If overflow is not nil, a name
// counted under Overflow gets overflow(its label value, Overflow's value)
// instead of Overflow's value itself (a tracer keeps the name on its
// spans while the metrics share Overflow's series).
func New[V any](max int, newValue func(label string) V, overflow func(name string, shared V) V) *Table[V] {
	t := &Table[V]{max: max, newValue: newValue, overflow: overflow, byLabel: make(map[string]V)}
	t.names.Store(&map[string]V{})
	return t
}

// Get returns the value of name's label.
func (t *Table[V]) Get(name string) V {
	if v, ok := (*t.names.Load())[name]; ok {
		return v
	}
	return t.add(name)
}

func (t *Table[V]) add(name string) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.names.Load()
	if v, ok := old[name]; ok {
		return v
	}
	label := Value(name)
	counted := label // the label the name's metrics are counted under
	if _, ok := t.byLabel[counted]; !ok && len(t.byLabel) >= t.max {
		counted = Overflow
	}
	v, ok := t.byLabel[counted]
	if !ok {
		v = t.newValue(counted)
		t.byLabel[counted] = v
	}
	if counted != label && t.overflow != nil {
		v = t.overflow(label, v)
	}
	// Remember the raw name so that it takes the fast path next time. Raw
	// names that overflow are not bounded by max, so stop remembering them
	// past a multiple of it (they then take this slower path, which stays
	// correct).
	if len(old) < 4*t.max {
		next := make(map[string]V, len(old)+1)
		maps.Copy(next, old)
		next[name] = v
		t.names.Store(&next)
	}
	return v
}

// Values returns the value of every label.
func (t *Table[V]) Values() []V {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.byLabel))
}

// Value turns a user's name into a valid label value: Unnamed for "",
// invalid UTF-8 replaced.
func Value(name string) string {
	if name == "" {
		return Unnamed
	}
	if !utf8.ValidString(name) {
		return strings.ToValidUTF8(name, "\uFFFD")
	}
	return name
}
