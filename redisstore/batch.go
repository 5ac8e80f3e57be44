package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/keyed"
)

// pipeliner is a client that pipelines commands: *redis.Client, and
// *redis.ClusterClient, which sends a pipeline's commands to the node of
// each one's hash slot, one pipeline per node.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// MaxBatch is the most exchanges one pipeline of KeyedBreakers.SyncAll
// carries; more members take more pipelines, one after another.
const MaxBatch = 256

// tryAcquire takes the right to call Redis if no other call of b holds it.
func (b *Breaker) tryAcquire() bool {
	select {
	case b.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// batched is one Breaker's exchange in a pipeline.
type batched struct {
	b       *Breaker
	f       *flush
	resend  bool
	keys    []string
	args    []any
	err     error // the exchange failed before the pipeline (the Clock's anchor)
	cmd     *redis.Cmd
	held    bool // b's right to call Redis is still to be released
	settled bool // b's state is cached, its right released: its listeners are to be told
}

// syncBreakers makes one exchange for each of bs, which share one client
// and Timeout, in pipelines of at most MaxBatch exchanges, each bounded by
// Timeout. A Breaker closed, or whose Redis call (an exchange, a probe's
// claim or report) is under way, is skipped. Each Breaker then concludes
// as after Sync: its state cached or its fallback made, its listeners
// told, on the caller's goroutine; a panic of one Breaker's listeners, or
// of its Clock or Rand, does not keep the others from concluding, and the
// first goes on once they have. With a client that does not pipeline
// (a Scripter of the caller's), each Breaker syncs in turn. It returns
// the first error.
//
// loop, when non-nil, is the keyed group's loop whose refresh this is:
// only the listener phase of each pipeline runs as its callbacks (see
// link.enterCallbacks), so that a Close made meanwhile from elsewhere
// waits for the loop, and one made from a listener does not.
func syncBreakers(ctx context.Context, bs []*Breaker, loop *link) error {
	if len(bs) == 0 {
		return nil
	}
	pl, ok := bs[0].s.link.client.(pipeliner)
	return syncMembers(ctx, bs, pl, ok,
		func(b *Breaker) bool { return b.l.closed.Load() },
		func(ctx context.Context, pl pipeliner, c []*Breaker, first *any) error {
			return syncChunk(ctx, pl, c, first, loop)
		},
		func(b *Breaker) error { return b.sync(ctx, false) })
}

// syncMembers is syncBreakers and syncBudgets: ms in chunks of at most
// MaxBatch, each in one pipeline (chunk) when the client pipelines (ok),
// else one member after another (one), closed members skipped. A panic of
// a member's is noted in first and goes on once every member has
// concluded; the first error is returned.
func syncMembers[M any](ctx context.Context, ms []M, pl pipeliner, ok bool, closed func(M) bool,
	chunk func(context.Context, pipeliner, []M, *any) error, one func(M) error) (err error) {
	var first any
	defer func() {
		if first != nil {
			panic(first)
		}
	}()
	for len(ms) > 0 {
		n := min(len(ms), MaxBatch)
		var e error
		if ok {
			e = chunk(ctx, pl, ms[:n], &first)
		} else {
			for _, m := range ms[:n] {
				if closed(m) {
					continue
				}
				if se := noted(&first, func() error { return one(m) }); se != nil && e == nil {
					e = se
				}
			}
		}
		if e != nil && err == nil {
			err = e
		}
		ms = ms[n:]
	}
	return err
}

// liveMembers returns g's members, the default and overflow members first,
// each once.
func liveMembers[M comparable](g *keyed.Group[M]) []M {
	var ms []M
	seen := make(map[M]bool)
	add := func(_ string, m M) {
		if !seen[m] {
			seen[m] = true
			ms = append(ms, m)
		}
	}
	add("", g.Default())
	add("", g.Overflow())
	g.Each(add)
	return ms
}

// syncChunk is syncBreakers for at most MaxBatch Breakers, in one
// pipeline.
func syncChunk(ctx context.Context, pl pipeliner, bs []*Breaker, first *any, loop *link) error {
	ctx, cancel := context.WithTimeout(ctx, bs[0].s.link.timeout)
	defer cancel()
	ps := make([]batched, 0, len(bs))
	defer func() {
		for i := range ps {
			if ps[i].held { // the Scripter panicked
				ps[i].b.unhold()
			}
		}
	}()
	for _, b := range bs {
		if b.l.closed.Load() || !b.tryAcquire() {
			continue
		}
		ps = append(ps, batched{b: b, held: true})
		ps[len(ps)-1].prepare(ctx, first)
	}
	pipe := pl.Pipeline()
	for i := range ps {
		if p := &ps[i]; p.held && p.err == nil {
			p.cmd = syncScript.EvalSha(ctx, pipe, p.keys, p.args...)
		}
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command's error is its own
		// Redis lost its script cache (SCRIPT FLUSH, a restart): load the
		// script once (to every node on a Cluster) and send the exchanges
		// that met NOSCRIPT again, in one pipeline.
		var again []*batched
		for i := range ps {
			if p := &ps[i]; p.cmd != nil && noScript(p.cmd.Err()) {
				again = append(again, p)
			}
		}
		if len(again) > 0 && syncScript.Load(ctx, bs[0].s.link.client).Err() == nil {
			pipe := pl.Pipeline()
			for _, p := range again {
				p.cmd = syncScript.EvalSha(ctx, pipe, p.keys, p.args...)
			}
			_, _ = pipe.Exec(ctx)
		}
	}
	// Every member's state is cached and its right released before any
	// listener runs: one that closes the group must not wait on a right
	// this chunk still holds.
	for i := range ps {
		if p := &ps[i]; p.held {
			p.finish(ctx, first)
		}
	}
	if loop != nil {
		loop.enterCallbacks()
		defer loop.leaveCallbacks()
	}
	var err error
	for i := range ps {
		if p := &ps[i]; p.settled {
			if e := noted(first, func() error { return p.b.toldSync(p.err, false) }); e != nil && err == nil {
				err = e
			}
		}
	}
	return err
}

// prepare makes p's batch and script call. A panic of the Clock or Rand
// releases the right to call Redis and is noted in first.
func (p *batched) prepare(ctx context.Context, first *any) {
	b := p.b
	defer func() {
		if v := recover(); v != nil {
			p.held = false
			b.unhold()
			if *first == nil {
				*first = v
			}
		}
	}()
	p.f, p.resend = b.nextFlush()
	now, err := b.tc.now(ctx, b.s.link.client)
	if err != nil {
		p.err = err
		return
	}
	p.keys, p.args = b.syncCall(p.f, now)
}

// finish decodes p's reply, completes the exchange and caches its state
// (see Breaker.sync), releasing the right to call Redis; p.err is then
// its error, for toldSync (an exchange that met NOSCRIPT even once the
// chunk loaded the script again has failed). A panic is noted in first,
// once the right is released.
func (p *batched) finish(ctx context.Context, first *any) {
	b := p.b
	defer func() {
		if v := recover(); v != nil {
			if p.held {
				p.held = false
				b.unhold()
			}
			if *first == nil {
				*first = v
			}
		}
	}()
	var st sharedState
	err := p.err
	if err == nil {
		var v []int64
		v, err = p.cmd.Int64Slice()
		if err == nil {
			st, err = b.syncReply(p.f, v)
		}
	}
	st, err = b.drain(ctx, p.resend, st, err)
	p.held = false // settleState releases it
	p.err = err
	b.settleState(st, err)
	p.settled = true
}

// SyncAll flushes the outcomes every live member counted (the default and
// overflow members included) and refreshes their cached shared states, as
// each member's Sync does, in pipelined exchanges: one round trip, per
// Redis node on a Cluster (each member's keys are one hash slot), for up
// to MaxBatch members, each pipeline bounded by Timeout. A member whose
// Redis call (an exchange, a probe) is under way is skipped. Listeners
// run on the caller's goroutine, member after member; a panic of one's
// does not keep the others from being told, and the first goes on once
// every member has concluded. With a client that cannot pipeline (it is
// not a *redis.Client or *redis.ClusterClient), the members sync one
// after another. It returns ErrClosed once the group is closed, and
// otherwise the first error of a member's exchange (that member has
// fallen back to local state).
func (k *KeyedBreakers) SyncAll(ctx context.Context) error { return k.syncAll(ctx, nil) }

// syncAll is SyncAll; loop is the group's loop when it is the caller.
func (k *KeyedBreakers) syncAll(ctx context.Context, loop *link) error {
	if k.closed.Load() {
		return ErrClosed
	}
	return syncBreakers(ctx, liveMembers(k.Group), loop)
}

// budgetBatched is one Budget's exchange in a pipeline.
type budgetBatched struct {
	b       *Budget
	x       *budgetExchange
	resend  bool
	keys    []string
	args    []any
	full    int64
	cmd     *redis.Cmd
	err     error
	held    bool // b's syncMu is still to be unlocked
	settled bool // the exchange is over and syncMu unlocked: the link is to be told
}

// syncBudgets is syncBreakers for Budgets: one exchange for each of bs,
// in pipelines of at most MaxBatch, skipping a Budget closed or whose
// exchange is under way; OnDegraded runs on the caller's goroutine, and
// the first panic goes on once every Budget has concluded.
// loop is as for syncBreakers.
func syncBudgets(ctx context.Context, bs []*Budget, loop *link) error {
	if len(bs) == 0 {
		return nil
	}
	pl, ok := bs[0].s.link.client.(pipeliner)
	return syncMembers(ctx, bs, pl, ok,
		func(b *Budget) bool { return b.l.closed.Load() },
		func(ctx context.Context, pl pipeliner, c []*Budget, first *any) error {
			return syncBudgetChunk(ctx, pl, c, first, loop)
		},
		func(b *Budget) error { return b.sync(ctx, false, false) })
}

// noScript reports whether err is Redis's NOSCRIPT: the script is not in
// its cache.
func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// noted runs fn, with a panic noted in first (the first one) instead of
// going on.
func noted(first *any, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil && *first == nil {
			*first = v
		}
	}()
	return fn()
}

func syncBudgetChunk(ctx context.Context, pl pipeliner, bs []*Budget, first *any, loop *link) error {
	ctx, cancel := context.WithTimeout(ctx, bs[0].s.link.timeout)
	defer cancel()
	ps := make([]budgetBatched, 0, len(bs))
	defer func() {
		for i := range ps {
			if ps[i].held { // the Scripter panicked
				ps[i].b.syncMu.Unlock()
			}
		}
	}()
	for _, b := range bs {
		if b.l.closed.Load() || !b.syncMu.TryLock() {
			continue
		}
		p := budgetBatched{b: b, held: true}
		p.x, p.resend = b.nextExchange(false)
		p.keys, p.args, p.full = b.budgetCall(p.x)
		ps = append(ps, p)
	}
	pipe := pl.Pipeline()
	for i := range ps {
		ps[i].cmd = budgetScript.EvalSha(ctx, pipe, ps[i].keys, ps[i].args...)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command's error is its own
		// Redis lost its script cache: load the script once and send the
		// exchanges that met NOSCRIPT again, in one pipeline.
		var again []*budgetBatched
		for i := range ps {
			if p := &ps[i]; noScript(p.cmd.Err()) {
				again = append(again, p)
			}
		}
		if len(again) > 0 && budgetScript.Load(ctx, bs[0].s.link.client).Err() == nil {
			pipe := pl.Pipeline()
			for _, p := range again {
				p.cmd = budgetScript.EvalSha(ctx, pipe, p.keys, p.args...)
			}
			_, _ = pipe.Exec(ctx)
		}
	}
	// Every member's lock is released before OnDegraded runs: one that
	// closes the group must not wait on a lock this chunk still holds.
	for i := range ps {
		p := &ps[i]
		_ = noted(first, func() error { p.finish(ctx); return nil })
	}
	if loop != nil {
		loop.enterCallbacks()
		defer loop.leaveCallbacks()
	}
	var err error
	for i := range ps {
		if p := &ps[i]; p.settled {
			if e := noted(first, func() error { return p.b.told(p.err) }); e != nil && err == nil {
				err = e
			}
		}
	}
	return err
}

// finish takes p's reply, completes the exchange and unlocks syncMu (see
// Budget.sync); p.err is then its error, for told.
func (p *budgetBatched) finish(ctx context.Context) {
	b := p.b
	defer func() {
		if p.held { // the Scripter panicked: unlocked before any OnDegraded runs
			p.held = false
			b.syncMu.Unlock()
		}
	}()
	v, err := p.cmd.Int64Slice()
	if err == nil {
		err = b.budgetReply(p.x, p.full, v)
	}
	p.err = b.drainLocked(ctx, false, p.resend, err)
	p.held = false
	b.syncMu.Unlock()
	p.settled = true
}

// SyncAll flushes the deposits every live member counted (the default and
// overflow members included) and tops up their leases, as each member's
// Sync does, in pipelined exchanges: one round trip, per Redis node on a
// Cluster, for up to MaxBatch members, each pipeline bounded by Timeout.
// A member whose exchange is under way is skipped. OnDegraded and
// OnMemberDegraded run on the caller's goroutine; a panic of one does not
// keep the other members from concluding, and the first goes on once
// they have. With a client that cannot pipeline the members sync one
// after another. It returns ErrClosed once the group is closed, and
// otherwise the first error of a member's exchange.
func (k *KeyedBudgets) SyncAll(ctx context.Context) error { return k.syncAll(ctx, nil) }

// syncAll is SyncAll; loop is the group's loop when it is the caller.
func (k *KeyedBudgets) syncAll(ctx context.Context, loop *link) error {
	if k.closed.Load() {
		return ErrClosed
	}
	return syncBudgets(ctx, liveMembers(k.Group), loop)
}
