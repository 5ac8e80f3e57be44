package sim

import (
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
