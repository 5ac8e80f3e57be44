package sim

import (
	"testing"
	"time"
)

// TestSkippedLaneEventCountsButDoesNotRun: a skipped lane event keeps its
// place (Now moves to its time, Events counts it) and its handler is not
// called; Skip of a taken event, or of noTimeout, touches nothing, also
// after the lane's ring has grown.
func TestSkippedLaneEventCountsButDoesNotRun(t *testing.T) {
	s := New(1)
	l := s.Lane(10)
	var ran []int32
	h := s.Register(func(e Event) { ran = append(ran, e.Ref) })
	var evs []LaneEvent
	for i := range 200 { // past the ring's first size
		evs = append(evs, s.AfterLaneEvent(l, h, int32(i), 0))
	}
	s.Skip(evs[3])
	s.Skip(evs[150])
	s.Skip(noTimeout)
	if !s.Step() || len(ran) != 1 || ran[0] != 0 {
		t.Fatalf("first step ran %v", ran)
	}
	s.Skip(evs[0]) // taken: must not mark the slot now holding another event
	s.Run()
	if s.Events() != 200 {
		t.Errorf("Events %d, want 200 (skipped events count)", s.Events())
	}
	if len(ran) != 198 {
		t.Fatalf("ran %d handlers, want 198", len(ran))
	}
	for i, want := 0, int32(0); i < len(ran); i, want = i+1, want+1 {
		if want == 3 || want == 150 {
			want++
		}
		if ran[i] != want {
			t.Fatalf("handler %d ran for %d, want %d", i, ran[i], want)
		}
	}
	if s.Now() != 10*time.Nanosecond {
		t.Errorf("Now %v, want 10ns", s.Now())
	}
}
