package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"pgregory.net/rapid"
)

func genOutcome(t *rapid.T, label string) outcome {
	return outcome(rapid.SampledFrom([]uint8{0, 1, 2, 3}).Draw(t, label))
}

// TestCountWindowModel checks the count window against a plain list of the
// last calls.
func TestCountWindowModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 20).Draw(t, "size")
		w := newCountWindow(size)
		var all []outcome
		for i := range rapid.IntRange(0, 100).Draw(t, "calls") {
			o := genOutcome(t, "outcome")
			w.add(time.Time{}, o)
			all = append(all, o)
			if rapid.IntRange(0, 30).Draw(t, "reset") == 0 {
				w.reset(time.Time{})
				all = nil
			}
			var s, f, sl uint64
			for _, o := range all[max(0, len(all)-size):] {
				if o.failed() {
					f++
				} else {
					s++
				}
				if o.slow() {
					sl++
				}
			}
			if gs, gf, gsl := w.sums(time.Time{}); gs != s || gf != f || gsl != sl {
				t.Fatalf("after %d calls: sums %d/%d/%d, want %d/%d/%d", i+1, gs, gf, gsl, s, f, sl)
			}
		}
	})
}

// TestTimeWindowModel checks the bucketed time window against a plain list
// of timestamped calls: a call counts while fewer than Buckets bucket
// boundaries have passed since it.
func TestTimeWindowModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "buckets")
		width := time.Duration(rapid.IntRange(1, 1000).Draw(t, "width"))
		base := clocktest.Epoch
		w := newTimeWindow(width*time.Duration(n), n, base)
		type ev struct {
			at time.Duration
			o  outcome
		}
		var evs []ev
		var now time.Duration
		for range rapid.IntRange(0, 100).Draw(t, "steps") {
			now += time.Duration(rapid.IntRange(0, int(width)*n*3/2).Draw(t, "advance"))
			if rapid.Bool().Draw(t, "call") {
				o := genOutcome(t, "outcome")
				w.add(base.Add(now), o)
				evs = append(evs, ev{now, o})
			}
			cur := int64(now / width)
			var s, f, sl uint64
			for _, e := range evs {
				if k := int64(e.at / width); k > cur-int64(n) {
					if e.o.failed() {
						f++
					} else {
						s++
					}
					if e.o.slow() {
						sl++
					}
				}
			}
			if gs, gf, gsl := w.sums(base.Add(now)); gs != s || gf != f || gsl != sl {
				t.Fatalf("at %v: sums %d/%d/%d, want %d/%d/%d", now, gs, gf, gsl, s, f, sl)
			}
		}
	})
}

// TestBreakerModel drives a consecutive-failures breaker with random calls,
// held calls released later (possibly in another generation) and time
// steps, and compares every answer with a straightforward model.
func TestBreakerModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const openTimeout = 10 * time.Second
		n := rapid.IntRange(1, 4).Draw(t, "failures")
		maxProbes := rapid.IntRange(1, 3).Draw(t, "maxProbes")
		threshold := rapid.IntRange(1, 3).Draw(t, "successThreshold")
		fc := clocktest.NewFake()
		b := New(Config{ConsecutiveFailures: n, MaxProbes: maxProbes, SuccessThreshold: threshold,
			OpenTimeout: openTimeout, OpenJitter: -1, Clock: fc})

		// The model.
		var (
			state    = Closed
			gen      uint64
			streak   int
			until    time.Time
			inflight int
			okProbes int
		)
		set := func(s State) {
			state, gen, inflight, okProbes, streak = s, gen+1, 0, 0, 0
			if s == Open {
				until = fc.Now().Add(openTimeout)
			}
		}
		expire := func() {
			if state == Open && !fc.Now().Before(until) {
				set(HalfOpen)
			}
		}
		type held struct {
			done  func(error)
			gen   uint64
			probe bool
		}
		var holds []held
		apply := func(h held, o outcome) {
			if h.gen != gen {
				return
			}
			if h.probe {
				inflight--
			}
			if o == outExcluded {
				return
			}
			switch {
			case state == Closed && o.failed():
				if streak++; streak >= n {
					set(Open)
				}
			case state == Closed:
				streak = 0
			case o.failed():
				set(Open)
			default:
				if okProbes++; okProbes >= threshold {
					set(Closed)
				}
			}
		}
		errOf := map[outcome]error{outSuccess: nil, outFailure: errDown, outExcluded: context.Canceled}
		allow := func() (held, bool) {
			expire()
			done, err := b.Allow()
			var want error
			switch {
			case state == Open:
				want = ErrOpen
			case state == HalfOpen && inflight >= maxProbes:
				want = ErrTooManyProbes
			}
			if err != want {
				t.Fatalf("Allow() = %v, model says %v (state %v)", err, want, state)
			}
			if err != nil {
				return held{}, false
			}
			h := held{done, gen, state == HalfOpen}
			if h.probe {
				inflight++
			}
			return h, true
		}
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0: // a call that ends at once
				o := rapid.SampledFrom([]outcome{outSuccess, outFailure, outExcluded}).Draw(t, "outcome")
				if h, ok := allow(); ok {
					h.done(errOf[o])
					apply(h, o)
				}
			case 1: // a call held open
				if h, ok := allow(); ok {
					holds = append(holds, h)
				}
			case 2: // a held call ends
				if len(holds) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(holds)-1).Draw(t, "held")
				o := rapid.SampledFrom([]outcome{outSuccess, outFailure, outExcluded}).Draw(t, "outcome")
				h := holds[i]
				holds = append(holds[:i], holds[i+1:]...)
				h.done(errOf[o])
				apply(h, o)
			case 3:
				fc.Advance(time.Duration(rapid.IntRange(0, 12).Draw(t, "seconds")) * time.Second)
			}
			expire()
			if s, g := b.State(), b.Generation(); s != state || g != gen {
				t.Fatalf("breaker %v gen %d, model %v gen %d", s, g, state, gen)
			}
		}
	})
}
