package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestRadixLevelsMatchReference: the radix heap pops in (time,
// sequence) order whatever bucket an event starts in (delays of every
// magnitude, ties at every level, pushes between pops and between a min
// and its pop).
func TestRadixLevelsMatchReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var q radix
		var ref []qitem
		var now time.Duration
		seq := uint32(0)
		for range rapid.IntRange(1, 600).Draw(rt, "ops") {
			op := rapid.IntRange(0, 3).Draw(rt, "op")
			if len(ref) == 0 || op >= 2 {
				shift := rapid.IntRange(0, 40).Draw(rt, "shift")
				d := time.Duration(rapid.Int64Range(0, 3).Draw(rt, "d")) << shift
				seq++
				it := qitem{at: now + d, slot: seq} // slot: the push order
				q.push(it)
				ref = append(ref, it)
				continue
			}
			m := 0
			for i := range ref {
				if ref[i].at < ref[m].at || ref[i].at == ref[m].at && ref[i].slot < ref[m].slot {
					m = i
				}
			}
			if p := q.min(); p == nil || *p != ref[m] {
				rt.Fatalf("min %v, want %v", p, ref[m])
			}
			if op == 1 {
				continue // looked, not taken: pushes follow
			}
			got := q.pop()
			if got != ref[m] {
				rt.Fatalf("pop %v, want %v", got, ref[m])
			}
			now = got.at
			ref = slices.Delete(ref, m, m+1)
			if q.len() != len(ref) {
				rt.Fatalf("len %d, want %d", q.len(), len(ref))
			}
		}
	})
}

// TestRadixSlotSortMatchesReference: events that share a slot of the
// heap's keys (radixShift) reach bucket 0 together and are sorted there:
// they still pop in (time, sequence) order, many ties included, however
// many share the slot.
func TestRadixSlotSortMatchesReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var q radix
		var ref []qitem
		slotStart := time.Duration(rapid.IntRange(1, 9).Draw(rt, "slot")) << radixShift
		spread := rapid.Int64Range(1, 1<<radixShift).Draw(rt, "spread")
		for i := range rapid.IntRange(1, 400).Draw(rt, "n") {
			it := qitem{at: slotStart + time.Duration(rapid.Int64Range(0, spread-1).Draw(rt, "d")), slot: uint32(i)}
			q.push(it)
			ref = append(ref, it)
		}
		slices.SortStableFunc(ref, func(a, b qitem) int { return int(a.at - b.at) })
		for i, want := range ref {
			if got := q.pop(); got != want {
				rt.Fatalf("pop %d: %v, want %v", i, got, want)
			}
		}
	})
}

// TestRadixTopLevelsMatchReference: delays of every size up to the end
// of time (every level of digits, slots near 2^47, times saturated at
// math.MaxInt64) pop in (time, sequence) order.
func TestRadixTopLevelsMatchReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var q radix
		var ref []qitem
		var now time.Duration
		seq := uint32(0)
		for range rapid.IntRange(1, 400).Draw(rt, "ops") {
			if len(ref) == 0 || rapid.Bool().Draw(rt, "push") {
				d := time.Duration(rapid.Int64Range(0, 3).Draw(rt, "d")) << rapid.IntRange(0, 62).Draw(rt, "shift")
				at := now + d
				if at < now || rapid.IntRange(0, 9).Draw(rt, "end") == 0 {
					at = math.MaxInt64 // the end of time, as Sim.due saturates
				}
				seq++
				it := qitem{at: at, slot: seq}
				q.push(it)
				ref = append(ref, it)
				continue
			}
			m := 0
			for i := range ref {
				if ref[i].at < ref[m].at || ref[i].at == ref[m].at && ref[i].slot < ref[m].slot {
					m = i
				}
			}
			if p := q.min(); p == nil || *p != ref[m] {
				rt.Fatalf("min %v, want %v", p, ref[m])
			}
			if got := q.pop(); got != ref[m] {
				rt.Fatalf("pop %v, want %v", got, ref[m])
			}
			now = ref[m].at
			ref = slices.Delete(ref, m, m+1)
		}
	})
}

// TestRadixReleaseEmptiesItsBuckets: release hands back a store whose
// every bucket is empty, so that the next heap starts as a new one, and
// the heap released still works.
func TestRadixReleaseEmptiesItsBuckets(t *testing.T) {
	var q radix
	for i := range 5000 {
		q.push(qitem{at: time.Duration(i*7919%5000) << (i % 40), slot: uint32(i)})
	}
	for range 1000 {
		q.pop()
	}
	st := q.st
	if st == nil {
		t.Fatal("no store after pushes into the levels")
	}
	q.release()
	for i := range st.b {
		if len(st.b[i]) != 0 {
			t.Fatalf("bucket %d holds %d events after release", i, len(st.b[i]))
		}
	}
	if q.len() != 0 || q.levels != 0 || q.min() != nil || q.st != nil {
		t.Fatalf("released heap: len %d, levels %b, min %v", q.len(), q.levels, q.min())
	}
	for l := range q.sum {
		if q.sum[l] != 0 || q.words[l] != [radixWords]uint64{} {
			t.Fatalf("level %d's bitmap not cleared", l)
		}
	}
	q.last = 1 << 40
	q.push(qitem{at: 1<<40 + 5<<radixShift, slot: 1})
	q.push(qitem{at: 1 << 40, slot: 2})
	if a, b := q.pop(), q.pop(); a.slot != 2 || b.slot != 1 {
		t.Fatalf("after release: popped %v then %v", a, b)
	}
}
