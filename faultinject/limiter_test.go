package faultinject

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestLimiterModel checks the limiter against a simple model under random
// sequences of arrivals, departures, abandoned waits and limit changes:
// never more than Concurrency running (unless the limit was lowered under
// them), never more than Queue waiting, slots granted in FIFO order, and
// no free slot left while someone waits.
func TestLimiterModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l limiter
		lim := Limit{Concurrency: rapid.IntRange(1, 4).Draw(t, "concurrency"), Queue: rapid.IntRange(0, 4).Draw(t, "queue")}
		l.setLimit(&lim, nil)
		var running int     // the model's running count
		var queue []*waiter // the model's FIFO queue
		var holders int     // slots held (granted or admitted) not yet released
		granted := map[*waiter]bool{}

		isClosed := func(w *waiter) bool {
			select {
			case <-w.ready:
				return true
			default:
				return false
			}
		}
		// settle moves waiters the limiter granted out of the model queue,
		// checking they are a prefix of it (FIFO).
		settle := func() {
			n := 0
			for n < len(queue) && isClosed(queue[n]) {
				granted[queue[n]] = true
				n++
			}
			for _, w := range queue[n:] {
				if isClosed(w) {
					t.Fatal("a later waiter was granted before an earlier one")
				}
			}
			running += n
			holders += n
			queue = queue[n:]
		}
		check := func() {
			var c Counters
			l.gauges(&c)
			if c.InFlight != running || c.Waiting != len(queue) {
				t.Fatalf("limiter has %d running, %d waiting; model %d, %d", c.InFlight, c.Waiting, running, len(queue))
			}
			if len(queue) > 0 && running < lim.Concurrency {
				t.Fatalf("%d waiting while only %d of %d slots are taken", len(queue), running, lim.Concurrency)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"enter": func(t *rapid.T) {
				e, w, _ := l.enter()
				switch {
				case running < lim.Concurrency && len(queue) == 0:
					if e != admitted {
						t.Fatalf("enter = %v with a free slot", e)
					}
					running++
					holders++
				case len(queue) < lim.Queue:
					if e != queued {
						t.Fatalf("enter = %v with room in the queue", e)
					}
					queue = append(queue, w)
				default:
					if e != full {
						t.Fatalf("enter = %v with the queue full", e)
					}
				}
				check()
			},
			"release": func(t *rapid.T) {
				if holders == 0 {
					t.Skip("nothing running")
				}
				l.release()
				running--
				holders--
				settle()
				check()
			},
			"leave": func(t *rapid.T) {
				if len(queue) == 0 {
					t.Skip("nobody waiting")
				}
				i := rapid.IntRange(0, len(queue)-1).Draw(t, "waiter")
				w := queue[i]
				if l.leave(w) {
					t.Fatal("leave reported a grant the model did not make")
				}
				queue = slices.Delete(queue, i, i+1)
				check()
			},
			"change limit": func(t *rapid.T) {
				lim = Limit{Concurrency: rapid.IntRange(1, 4).Draw(t, "concurrency"), Queue: rapid.IntRange(0, 4).Draw(t, "queue")}
				l.setLimit(&lim, nil)
				settle()
				check()
			},
			"": func(t *rapid.T) {
				if l.peakInFlight < running || l.peakWaiting < len(queue) {
					t.Fatal("peaks below current values")
				}
			},
		})
	})
}

// TestLimiterLeaveAfterGrant covers the race where a waiter gives up just
// as it is granted a slot: leave reports the grant so the slot is not lost.
func TestLimiterLeaveAfterGrant(t *testing.T) {
	var l limiter
	l.setLimit(&Limit{Concurrency: 1, Queue: 1}, nil)
	if e, _, _ := l.enter(); e != admitted {
		t.Fatal("first enter not admitted")
	}
	e, w, _ := l.enter()
	if e != queued {
		t.Fatal("second enter not queued")
	}
	l.release()
	if !l.leave(w) {
		t.Fatal("leave after the grant reported no grant")
	}
	var c Counters
	l.gauges(&c)
	if c.InFlight != 1 || c.Waiting != 0 {
		t.Fatalf("gauges %+v", c)
	}
}
