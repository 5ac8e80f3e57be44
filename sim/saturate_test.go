package sim

import (
	"math"
	"testing"
	"time"
)

// TestAfterHugeDelaySaturates: a delay near math.MaxInt64, from a time
// after 0, is due at the end of time, not (overflowed) at once; so is a
// lane's.
func TestAfterHugeDelaySaturates(t *testing.T) {
	s := New(1)
	var ran []int32
	h := s.Register(func(e Event) { ran = append(ran, e.Ref) })
	far := s.Lane(math.MaxInt64)
	s.RunUntil(time.Second)
	s.After(math.MaxInt64, h, 1, 0)
	s.AfterLane(far, h, 2, 0)
	s.After(time.Millisecond, h, 3, 0)
	s.Step()
	if len(ran) != 1 || ran[0] != 3 {
		t.Fatalf("first event run: %v, want the 1ms one (3)", ran)
	}
	if at, ok := s.NextAt(); !ok || at != math.MaxInt64 {
		t.Fatalf("NextAt %v %v, want the end of time", at, ok)
	}
}
