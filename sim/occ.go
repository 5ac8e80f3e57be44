package sim

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// OCC is the contention model of the AWS Architecture Blog's "Exponential
// Backoff and Jitter": Clients clients each want to update one shared row
// once, with optimistic concurrency control, all starting at time 0.
//
// An attempt is four network legs, each drawn from Leg (|Normal(10ms, 2ms)|
// by default): read request, read reply (carrying the row's version), write
// request carrying that version, write reply. The server is instant and
// unlimited: a write carrying the current version increments it and
// succeeds; any other write fails. After a failure the client's attempt
// count n grows by one and its next read reaches the server after one leg
// plus the backoff strategy's Delay(n, prev): the real backoff code, so
// Exponential{Base: 5ms, Max: 2s} waits min(2s, 5ms·2^(n-1)) before the
// n-th retry, the AWS post's min(cap, base·2^attempt) counting attempts
// from 0. Decorrelated jitter keeps prev per client, starting at the base;
// the backoff package draws it uniformly in [base, min(cap, 3·prev)], where
// the AWS post takes min(cap, uniform(base, 3·prev)): the same while
// 3·prev stays under the cap.
//
// Calls are the server's writes (one per attempt); the completion time is
// when the last client succeeds.
type OCC struct {
	// Clients is the number of clients, each updating the row once, in
	// [1, 1000000] (RunOCC refuses anything else with ErrOCC).
	Clients int
	// Leg is the latency of each of an attempt's four network legs. The
	// zero Dist: |Normal(10ms, 2ms)|.
	Leg Dist
	// Backoff builds the strategy from the run's random source; nil
	// retries at once.
	Backoff func(rand.Source) backoff.Strategy
	// Limit stops a run that has not finished (0: 1h of virtual time);
	// Completion is then Limit and Done is false.
	Limit time.Duration
}

// OCCResult is one OCC run.
type OCCResult struct {
	// Calls is the number of writes that reached the server, one per
	// attempt, successful or not.
	Calls int
	// Completion is the virtual time at which the last client's write
	// reply arrived; Limit (or its 1h default) when the run did not end.
	Completion time.Duration
	// Done is set when every client succeeded before the limit.
	Done bool
	// Events is the number of events the run processed.
	Events uint64
}

// ErrOCC is returned for an OCC model that cannot run.
var ErrOCC = errors.New("sim: OCC model needs 1 to 1000000 clients")

type occClient struct {
	version  uint64
	attempts int32
	prev     time.Duration
}

// RunOCC runs the model once.
func RunOCC(m OCC, seed uint64) (OCCResult, error) {
	if m.Clients <= 0 || m.Clients > 1_000_000 {
		return OCCResult{}, ErrOCC
	}
	leg := m.Leg
	if leg == (Dist{}) {
		leg = Normal(10*time.Millisecond, 2*time.Millisecond)
	}
	limit := m.Limit
	if limit <= 0 {
		limit = time.Hour
	}
	s := New(seed)
	var strat backoff.Strategy
	if m.Backoff != nil {
		strat = m.Backoff(rand.NewPCG(seed^0x510e527fade682d1, seed+0x9b05688c2b3e6c1f))
	}
	var (
		version uint64
		res     OCCResult
		left    = m.Clients
		clients = make([]occClient, m.Clients)
		rng     = s.Rand()
	)
	var hRead, hWrite, hReply HandlerID
	// read: the read request reaches the server, which answers with the
	// current version; the client writes as soon as the reply arrives.
	hRead = s.Register(func(e Event) {
		clients[e.Ref].version = version
		s.After(leg.Sample(rng)+leg.Sample(rng), hWrite, e.Ref, 0)
	})
	// write: the write request reaches the server.
	hWrite = s.Register(func(e Event) {
		res.Calls++
		ok := int64(0)
		if clients[e.Ref].version == version {
			version++
			ok = 1
		}
		s.After(leg.Sample(rng), hReply, e.Ref, ok)
	})
	// reply: the write's answer reaches the client.
	hReply = s.Register(func(e Event) {
		c := &clients[e.Ref]
		if e.Arg == 1 {
			left--
			if left == 0 {
				res.Completion = s.Now()
				res.Done = true
				s.Stop()
			}
			return
		}
		c.attempts++
		var d time.Duration
		if strat != nil {
			d = strat.Delay(int(c.attempts), c.prev)
			c.prev = d
		}
		s.After(d+leg.Sample(rng), hRead, e.Ref, 0)
	})
	for i := range clients {
		s.Schedule(leg.Sample(rng), hRead, int32(i), 0)
	}
	s.RunUntil(limit)
	if !res.Done {
		res.Completion = limit
	}
	res.Events = s.Events()
	s.release()
	return res, nil
}
