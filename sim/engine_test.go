package sim

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEventsRunInTimeOrderAndFIFOOnTies(t *testing.T) {
	s := New(1)
	var got []int32
	h := s.Register(func(e Event) {
		if e.At != s.Now() {
			t.Errorf("event %d: At %v but Now %v", e.Ref, e.At, s.Now())
		}
		got = append(got, e.Ref)
	})
	s.Schedule(30*time.Millisecond, h, 3, 0)
	s.Schedule(10*time.Millisecond, h, 1, 0)
	s.Schedule(20*time.Millisecond, h, 2, 0)
	s.Schedule(10*time.Millisecond, h, 11, 0) // same time as 1, scheduled later
	s.Schedule(10*time.Millisecond, h, 12, 0)
	s.Run()
	want := []int32{1, 11, 12, 2, 3}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if s.Events() != 5 || s.Pending() != 0 {
		t.Fatalf("events %d pending %d", s.Events(), s.Pending())
	}
}

func TestScheduleInThePastRunsNow(t *testing.T) {
	s := New(1)
	var at []time.Duration
	var h HandlerID
	h = s.Register(func(e Event) {
		at = append(at, e.At)
		if e.Ref == 0 {
			s.Schedule(s.Now()-time.Second, h, 1, 0) // in the past
			s.After(0, h, 2, 0)
		}
	})
	s.Schedule(time.Second, h, 0, 0)
	s.Run()
	if want := []time.Duration{time.Second, time.Second, time.Second}; !slices.Equal(at, want) {
		t.Fatalf("times %v, want %v", at, want)
	}
}

func TestRunUntilAndStop(t *testing.T) {
	s := New(1)
	var n int
	h := s.Register(func(e Event) {
		n++
		if e.Arg == 1 {
			s.Stop()
		}
	})
	for i := 1; i <= 5; i++ {
		s.Schedule(time.Duration(i)*time.Second, h, int32(i), 0)
	}
	s.RunUntil(2500 * time.Millisecond)
	if n != 2 || s.Now() != 2500*time.Millisecond {
		t.Fatalf("ran %d events, now %v; want 2 and 2.5s", n, s.Now())
	}
	if at, ok := s.NextAt(); !ok || at != 3*time.Second {
		t.Fatalf("next at %v %v", at, ok)
	}
	s.Schedule(4*time.Second, h, 9, 1) // stops the run
	s.Run()
	if n != 5 || s.Now() != 4*time.Second {
		t.Fatalf("after Stop: ran %d, now %v", n, s.Now())
	}
	s.Run()
	if n != 6 || s.Pending() != 0 {
		t.Fatalf("ran %d, pending %d", n, s.Pending())
	}
	if s.Step() {
		t.Fatal("Step on an empty heap reported an event")
	}
}

// The heap pops every schedule in (time, scheduling order) order,
// including events scheduled while running.
func TestHeapOrderProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New(1)
		type ev struct {
			at  time.Duration
			seq int
		}
		var got []ev
		var h HandlerID
		seq := 0
		children := rapid.SliceOfN(rapid.Int64Range(0, 50), 0, 200).Draw(rt, "children")
		h = s.Register(func(e Event) {
			got = append(got, ev{e.At, int(e.Arg)})
			if c := int(e.Ref); c < len(children) {
				seq++
				s.After(time.Duration(children[c]), h, int32(c+1), int64(seq))
			}
		})
		roots := rapid.SliceOfN(rapid.Int64Range(0, 100), 1, 300).Draw(rt, "roots")
		for _, at := range roots {
			seq++
			s.Schedule(time.Duration(at), h, int32(len(children)), int64(seq))
		}
		seq++
		s.Schedule(0, h, 0, int64(seq))
		s.Run()
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			if b.at < a.at || (b.at == a.at && b.seq < a.seq) {
				rt.Fatalf("event %d (%v, #%d) ran after (%v, #%d)", i, b.at, b.seq, a.at, a.seq)
			}
		}
		if len(got) != len(roots)+1+len(children) {
			rt.Fatalf("ran %d events, want %d", len(got), len(roots)+1+len(children))
		}
	})
}

func TestScheduleAndStepDoNotAllocate(t *testing.T) {
	s := New(1)
	var h HandlerID
	h = s.Register(func(e Event) { s.After(time.Duration(e.Arg), h, e.Ref, e.Arg) })
	for i := 0; i < 1000; i++ {
		s.Schedule(time.Duration(i), h, int32(i), int64(i%97+1))
	}
	for i := 0; i < 10000; i++ { // grow the heap to its working size
		s.Step()
	}
	if a := testing.AllocsPerRun(1000, func() { s.Step() }); a != 0 {
		t.Fatalf("Step allocates %v times", a)
	}
}

func TestClockAfterFuncRunsInVirtualTime(t *testing.T) {
	s := New(1)
	c := s.Clock()
	start := c.Now()
	if !start.Equal(Epoch) {
		t.Fatalf("clock starts at %v, want %v", start, Epoch)
	}
	var fired []time.Duration
	c.AfterFunc(2*time.Second, func() { fired = append(fired, c.Since(start)) })
	stopped := c.AfterFunc(time.Second, func() { t.Error("stopped timer fired") })
	reset := c.AfterFunc(time.Second, func() { fired = append(fired, c.Since(start)) })
	if !stopped.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
	if !reset.Reset(3 * time.Second) {
		t.Fatal("Reset of an armed timer reported false")
	}
	timer := c.NewTimer(500 * time.Millisecond)
	s.Run()
	if want := []time.Duration{2 * time.Second, 3 * time.Second}; !slices.Equal(fired, want) {
		t.Fatalf("fired at %v, want %v", fired, want)
	}
	select {
	case at := <-timer.C():
		if at.Sub(start) != 500*time.Millisecond {
			t.Fatalf("timer sent %v", at.Sub(start))
		}
	default:
		t.Fatal("NewTimer's channel got nothing")
	}
	if reset.Stop() {
		t.Fatal("Stop after firing reported true")
	}
	// A fired timer can be reset and fires again.
	if reset.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it active")
	}
	s.Run()
	if len(fired) != 3 || fired[2] != 4*time.Second {
		t.Fatalf("fired %v", fired)
	}
}

// An event scheduled through a fixed-delay lane runs exactly when, and in
// the same order among the others as, the same event scheduled with After
// and the lane's delay: two Sims running one random program, one with
// lanes and one without, see the same trace, the same Pending and NextAt.
func TestLaneRunsAsAfterWould(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		delays := []time.Duration{0, 3, 7}
		type step struct {
			lane  int // -1: a plain After
			delay int64
		}
		prog := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) step {
			return step{rapid.IntRange(-1, len(delays)-1).Draw(t, "lane"), rapid.Int64Range(0, 12).Draw(t, "delay")}
		}), 0, 300).Draw(rt, "prog")
		roots := rapid.SliceOfN(rapid.Int64Range(0, 20), 1, 50).Draw(rt, "roots")
		until := time.Duration(rapid.Int64Range(0, 40).Draw(rt, "until"))
		type ev struct {
			at  time.Duration
			ref int32
			arg int64
		}
		run := func(useLanes bool) (trace []ev, pending []int, next []time.Duration) {
			s := New(1)
			lanes := make([]LaneID, len(delays))
			for i, d := range delays {
				lanes[i] = s.Lane(d)
			}
			var h HandlerID
			k := 0
			h = s.Register(func(e Event) {
				trace = append(trace, ev{e.At, e.Ref, e.Arg})
				for j := 0; j < 2 && k < len(prog); j++ { // up to two children each
					st := prog[k]
					k++
					switch {
					case st.lane < 0:
						s.After(time.Duration(st.delay), h, int32(k), st.delay)
					case useLanes:
						s.AfterLane(lanes[st.lane], h, int32(k), -1)
					default:
						s.After(delays[st.lane], h, int32(k), -1)
					}
				}
			})
			for i, at := range roots {
				s.Schedule(time.Duration(at), h, int32(-i-1), 0)
			}
			s.RunUntil(until)
			at, _ := s.NextAt()
			pending, next = append(pending, s.Pending()), append(next, at)
			for s.Step() {
				at, _ := s.NextAt()
				pending, next = append(pending, s.Pending()), append(next, at)
			}
			return trace, pending, next
		}
		t1, p1, n1 := run(true)
		t2, p2, n2 := run(false)
		if !slices.Equal(t1, t2) {
			rt.Fatalf("with lanes the trace is\n%v\nwithout\n%v", t1, t2)
		}
		if !slices.Equal(p1, p2) || !slices.Equal(n1, n2) {
			rt.Fatalf("Pending %v NextAt %v with lanes, %v %v without", p1, n1, p2, n2)
		}
	})
}

func TestAfterLaneAndStepDoNotAllocate(t *testing.T) {
	s := New(1)
	l := s.Lane(50)
	var h HandlerID
	h = s.Register(func(e Event) {
		if e.Arg == 0 {
			s.AfterLane(l, h, e.Ref, 1)
		} else {
			s.After(time.Duration(e.Ref%7), h, e.Ref, 0)
		}
	})
	for i := 0; i < 1000; i++ {
		s.Schedule(time.Duration(i), h, int32(i), int64(i%2))
	}
	for i := 0; i < 10000; i++ { // grow the heap and the lane
		s.Step()
	}
	if a := testing.AllocsPerRun(1000, func() { s.Step() }); a != 0 {
		t.Fatalf("Step with a lane allocates %v times", a)
	}
}

// The event queue against a reference (a list searched for the least
// (time, sequence)), under any mix of Schedule from outside the loop
// (before, at and after the next event), NextAt, Step and RunUntil: the
// queue takes its minimum ahead of time (NextAt, RunUntil stopping before
// an event), so an event scheduled below that minimum afterwards must
// still come first.
func TestQueueMatchesReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New(1)
		type ev struct {
			at  time.Duration
			seq int64
		}
		var ref []ev
		var got []ev
		h := s.Register(func(e Event) { got = append(got, ev{e.At, e.Arg}) })
		seq := int64(0)
		refPop := func() ev {
			m := 0
			for i, e := range ref {
				if e.at < ref[m].at || e.at == ref[m].at && e.seq < ref[m].seq {
					m = i
				}
			}
			e := ref[m]
			ref = append(ref[:m], ref[m+1:]...)
			return e
		}
		var want []ev
		ops := rapid.IntRange(1, 400).Draw(rt, "ops")
		for range ops {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // schedule, often close to now
				var d time.Duration
				if rapid.Bool().Draw(rt, "near") {
					d = time.Duration(rapid.Int64Range(-2, 4).Draw(rt, "d"))
				} else {
					d = time.Duration(rapid.Int64Range(0, 1<<40).Draw(rt, "far"))
				}
				seq++
				s.Schedule(s.Now()+d, h, 0, seq)
				ref = append(ref, ev{max(s.Now()+d, s.Now()), seq})
			case 3:
				at, ok := s.NextAt()
				if ok != (len(ref) > 0) {
					rt.Fatalf("NextAt ok %v with %d pending", ok, len(ref))
				}
				if ok {
					m := ref[0]
					for _, e := range ref {
						if e.at < m.at {
							m = e
						}
					}
					if at != m.at {
						rt.Fatalf("NextAt %v, want %v", at, m.at)
					}
				}
			case 4:
				if s.Step() {
					want = append(want, refPop())
				}
			case 5:
				until := s.Now() + time.Duration(rapid.Int64Range(0, 8).Draw(rt, "until"))
				s.RunUntil(until)
				for len(ref) > 0 {
					m := ref[0]
					for _, e := range ref {
						if e.at < m.at {
							m = e
						}
					}
					if m.at > until {
						break
					}
					want = append(want, refPop())
				}
			}
			if s.Pending() != len(ref) {
				rt.Fatalf("Pending %d, want %d", s.Pending(), len(ref))
			}
		}
		for s.Step() {
			want = append(want, refPop())
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("ran\n%v\nwant\n%v", got, want)
		}
	})
}
