package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// codelDriver runs the simulator's queue rule (codelQueue in front of a
// real admission.Limiter's TryAcquire, as RunOverload does) on a fake
// clock.
type codelDriver struct {
	f    *clocktest.Fake
	lim  *admission.Limiter
	q    *codelQueue[int]
	dl   map[int]time.Duration
	held map[int]admission.Permit
	out  []string
}

func (d *codelDriver) now() time.Duration { return d.f.Now().Sub(clocktest.Epoch) }

func (d *codelDriver) gone(id int) bool { return d.now() >= d.dl[id] }

func (d *codelDriver) dispatch() {
	now := d.now()
	for {
		n, wasGone, ok := d.q.Next(now, d.gone)
		if !ok {
			return
		}
		if wasGone {
			d.out = append(d.out, fmt.Sprintf("%d:%s", n.v, admission.ReasonCallerGone))
			continue
		}
		p, err := d.lim.TryAcquire()
		if err != nil {
			return
		}
		d.q.Take(now, n)
		d.held[n.v] = p
		d.out = append(d.out, fmt.Sprintf("%d:admitted", n.v))
	}
}

func (d *codelDriver) arrive(id int) {
	now := d.now()
	if d.q.Len() == 0 {
		if p, err := d.lim.TryAcquire(); err == nil {
			d.held[id] = p
			d.out = append(d.out, fmt.Sprintf("%d:admitted", id))
			return
		}
	}
	n, res := d.q.Push(now, id, d.gone(id))
	switch res {
	case queueFull:
		d.out = append(d.out, fmt.Sprintf("%d:%s", id, admission.ReasonQueueFull))
	case queueCallerGone:
		d.out = append(d.out, fmt.Sprintf("%d:%s", id, admission.ReasonCallerGone))
	default:
		d.f.AfterFunc(n.timeout, func() {
			if d.q.Expire(d.now(), n) {
				d.out = append(d.out, fmt.Sprintf("%d:%s", id, admission.ReasonQueueTimeout))
			}
		})
		d.dispatch()
	}
}

func (d *codelDriver) release(id int) {
	d.held[id].Release()
	delete(d.held, id)
	d.dispatch()
}

type acquired struct {
	id  int
	p   admission.Permit
	err error
}

func reasonOf(err error) string {
	for _, r := range []struct {
		e error
		n admission.Reason
	}{{admission.ErrQueueFull, admission.ReasonQueueFull}, {admission.ErrQueueTimeout, admission.ReasonQueueTimeout},
		{admission.ErrCallerGone, admission.ReasonCallerGone}, {admission.ErrLimit, admission.ReasonLimit}} {
		if errors.Is(err, r.e) {
			return r.n.String()
		}
	}
	return "error " + err.Error()
}

// The simulator's CoDel and adaptive-LIFO rule against admission's own
// queue, on the same random sequence of arrivals (each with a caller's
// deadline), releases and clock steps: after every step the same
// requests are admitted and the same ones shed, for the same reasons.
func TestCoDelQueueModelMatchesAdmission(t *testing.T) {
	const target, interval = 5 * time.Millisecond, 20 * time.Millisecond
	cfg := func(f *clocktest.Fake) admission.Config {
		return admission.Config{Limit: admission.Fixed{N: 2}, Clock: f, ProbeInterval: -1, QueueLength: 4,
			QueueTarget: target, QueueInterval: interval}
	}
	for seed := uint64(1); seed <= 5; seed++ {
		realF, modelF := clocktest.NewFake(), clocktest.NewFake()
		realL, err := admission.New(cfg(realF))
		if err != nil {
			t.Fatal(err)
		}
		modelL, _ := admission.New(cfg(modelF))
		d := &codelDriver{f: modelF, lim: modelL, q: newCoDelQueue[int](4, target, interval), dl: map[int]time.Duration{}, held: map[int]admission.Permit{}}
		results := make(chan acquired, 1000)
		realHeld := map[int]admission.Permit{}
		rng := rand.New(rand.NewPCG(seed, 7))
		// collect reads n answers from the real queue.
		answered := 0
		collect := func(n int) []string {
			var out []string
			for range n {
				r := <-results
				answered++
				if r.err == nil {
					realHeld[r.id] = r.p
					out = append(out, fmt.Sprintf("%d:admitted", r.id))
				} else {
					out = append(out, fmt.Sprintf("%d:%s", r.id, reasonOf(r.err)))
				}
			}
			return out
		}
		var trace []string
		id := 0
		for step := range 400 {
			var got []string
			d.out = nil
			before := realL.Queued()
			switch k := rng.IntN(10); {
			case k < 5: // an arrival
				id++
				dl := time.Duration(rng.IntN(40)) * time.Millisecond
				d.dl[id] = d.now() + dl
				ctx := retry.WithInbound(context.Background(), retry.Inbound{Deadline: realF.Now().Add(dl)})
				armed := realF.Armed()
				mine := make(chan acquired, 1)
				go func(id int) {
					p, err := realL.Acquire(ctx)
					mine <- acquired{id, p, err}
				}(id)
				// Wait until it has answered or is queued with its timer set.
			wait:
				for {
					select {
					case r := <-mine:
						results <- r
						got = collect(1 + before - realL.Queued())
						break wait
					default:
						if realF.Armed() > armed {
							go func() { results <- <-mine }()
							got = collect(before + 1 - realL.Queued())
							break wait
						}
						runtime.Gosched()
					}
				}
				d.arrive(id)
				trace = append(trace, fmt.Sprintf("arrive %d (deadline +%s)", id, dl))
			case k < 8: // a release
				if len(realHeld) == 0 {
					continue
				}
				ids := make([]int, 0, len(realHeld))
				for i := range realHeld {
					ids = append(ids, i)
				}
				slices.Sort(ids)
				r := ids[rng.IntN(len(ids))]
				realHeld[r].Release()
				delete(realHeld, r)
				got = collect(before - realL.Queued())
				d.release(r)
				trace = append(trace, fmt.Sprintf("release %d", r))
			default: // time passes
				dt := time.Duration(rng.IntN(8)) * time.Millisecond
				realF.Advance(dt)
				got = collect(before - realL.Queued())
				modelF.Advance(dt)
				trace = append(trace, fmt.Sprintf("advance %s", dt))
			}
			slices.Sort(got)
			want := slices.Clone(d.out)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d (%s): admission decided %v, the model %v; after:\n%s", seed, step, trace[len(trace)-1], got, want, strings.Join(trace, "\n"))
			}
		}
		// End: release everything, let the queue time out, and hear
		// every request, so that no goroutine is left.
		for _, p := range realHeld {
			p.Release()
		}
		clear(realHeld)
		realF.Advance(time.Second)
		collect(id - answered)
		for _, p := range realHeld {
			p.Release()
		}
		if realL.Queued() != 0 || realL.InFlight() != 0 {
			t.Fatalf("seed %d: %d queued, %d in flight at the end", seed, realL.Queued(), realL.InFlight())
		}
	}
}
