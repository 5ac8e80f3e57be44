package live

import (
	"cmp"
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// openCall is one call of an open-loop schedule: client Client starts it
// At after the run's start.
type openCall struct {
	At     time.Duration
	Client int
}

// openSchedule returns the calls of clients that each start a call every
// interval, from a phase drawn from seed (sim.Arrival{Kind: sim.Periodic}
// .Stream, as the scenarios draw theirs), until duration: the first
// maxCalls of them in time order. The same seed gives the same schedule,
// so every policy meets the same calls.
func openSchedule(clients int, interval, duration time.Duration, seed uint64, maxCalls int) []openCall {
	return arrivalSchedule(sim.Arrival{Kind: sim.Periodic, Interval: interval}, clients, duration, seed, maxCalls)
}

// arrivalSchedule returns the calls of clients that each follow a's
// pattern (a.Stream(seed, client)) until duration: the first maxCalls of
// them in time order.
func arrivalSchedule(a sim.Arrival, clients int, duration time.Duration, seed uint64, maxCalls int) []openCall {
	// Merge the clients' streams in time order (a heap of each client's
	// next call), so that memory stays within clients + maxCalls.
	streams := make([]sim.ArrivalStream, clients)
	h := make(callHeap, 0, clients)
	for i := range clients {
		streams[i] = a.Stream(seed, i)
		if at := streams[i].First(); at < duration {
			h = append(h, openCall{At: at, Client: i})
		}
	}
	heap.Init(&h)
	// A periodic stream with no interval would stand still: one call.
	moving := a.Kind != sim.Periodic || a.Interval > 0
	var out []openCall
	for len(h) > 0 && len(out) < maxCalls {
		c := h[0]
		out = append(out, c)
		// step < duration−At rather than At+step < duration: a huge
		// interval must not wrap round into the past.
		if step := streams[c.Client].Next(); moving && step < duration-c.At {
			h[0].At = c.At + step
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return out
}

// callHeap orders calls by time, then client.
type callHeap []openCall

func (h callHeap) Len() int { return len(h) }
func (h callHeap) Less(i, j int) bool {
	if c := cmp.Compare(h[i].At, h[j].At); c != 0 {
		return c < 0
	}
	return h[i].Client < h[j].Client
}
func (h callHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *callHeap) Push(x any)   { *h = append(*h, x.(openCall)) }
func (h *callHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runOpenLoop starts call for every entry of sched at start+At, each on a
// goroutine of its own, whether or not the earlier calls have ended (open
// loop: a slow server does not slow the arrivals). It stops starting
// calls when ctx ends, returns once every call has returned, and reports
// how late, at worst, a call started against its schedule. A call that
// panics (a user's callback inside the policy, say) stops the schedule;
// once the calls started have returned, the first panic goes on in the
// caller's goroutine.
func runOpenLoop(ctx context.Context, start time.Time, sched []openCall, call func(openCall)) time.Duration {
	var wg sync.WaitGroup
	var lag time.Duration
	var panicked panicBox
	defer panicked.repanic(&wg)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for _, c := range sched {
		due := start.Add(c.At)
		if d := time.Until(due); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil || panicked.set() {
			break
		}
		lag = max(lag, time.Since(due))
		wg.Go(func() {
			defer panicked.catch()
			call(c)
		})
	}
	wg.Wait()
	return lag
}

// panicBox keeps the first panic of a group of goroutines, so that it can
// go on in the goroutine that waits for them.
type panicBox struct {
	mu  sync.Mutex
	v   any
	got bool
}

// catch, deferred in a goroutine of the group, keeps its panic.
func (p *panicBox) catch() {
	if v := recover(); v != nil {
		p.mu.Lock()
		if !p.got {
			p.v, p.got = v, true
		}
		p.mu.Unlock()
	}
}

func (p *panicBox) set() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got
}

// repanic, deferred by the waiting goroutine, waits for the group and
// raises the panic kept, if any.
func (p *panicBox) repanic(wg *sync.WaitGroup) {
	wg.Wait()
	if p.set() {
		panic(p.v)
	}
}

// roundDur rounds d for a title: to the millisecond from 10ms, to the
// microsecond below, so that a third of a second reads 333ms, not
// 333.333333ms.
func roundDur(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
