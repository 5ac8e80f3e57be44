package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// bubbleClock is the time package as a clock.Clock that is not
// clock.Real, so that hedge.Do keeps one runtime timer per call (as on
// a fake clock) and, inside a synctest bubble, every wait is virtual.
type bubbleClock struct{}

type bubbleTimer struct{ *time.Timer }

func (t bubbleTimer) C() <-chan time.Time { return t.Timer.C }

func (bubbleClock) Now() time.Time                  { return time.Now() }
func (bubbleClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (bubbleClock) NewTimer(d time.Duration) clock.Timer {
	return bubbleTimer{time.NewTimer(d)}
}
func (bubbleClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return bubbleTimer{time.AfterFunc(d, f)}
}

// hedgeStep is the scripted answer of a call's attempt n: after d, a
// success or a (retryable) failure.
type hedgeStep struct {
	d    time.Duration
	fail bool
}

// hedgeEvent is one thing that happened to attempt n, at a time from the
// call's start: "start", "ok", "fail" or "cancel"; n 0 is the call's end
// ("call ok", "call failed").
type hedgeEvent struct {
	at   time.Duration
	n    int
	what string
}

func sortEvents(evs []hedgeEvent) {
	slices.SortFunc(evs, func(a, b hedgeEvent) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		// The call's end comes after its attempts' at the same time.
		an, bn := a.n, b.n
		if an == 0 {
			an = 1 << 30
		}
		if bn == 0 {
			bn = 1 << 30
		}
		return an - bn
	})
}

type hedgeRuleCase struct {
	name             string
	maxHedges, limit int
	delay, backoff   time.Duration
	steps            []hedgeStep
	inbound          bool // the inbound caller retries (the layer rule governs the call)
}

var errScripted = errors.New("scripted failure")

// libraryHedge runs the cases through the real hedge.Do in virtual time,
// one after the other in one synctest bubble (hedge pools its calls, and
// a pooled call's channel belongs to the bubble that made it).
func libraryHedge(t *testing.T, cases []hedgeRuleCase) [][]hedgeEvent {
	out := make([][]hedgeEvent, len(cases))
	synctest.Test(t, func(t *testing.T) {
		for i, c := range cases {
			out[i] = libraryHedgeOne(c)
		}
	})
	return out
}

func libraryHedgeOne(c hedgeRuleCase) []hedgeEvent {
	var evs []hedgeEvent
	t0 := time.Now()
	var mu sync.Mutex
	rec := func(n int, what string) {
		mu.Lock()
		evs = append(evs, hedgeEvent{time.Since(t0), n, what})
		mu.Unlock()
	}
	p := &retry.Policy{MaxAttempts: c.limit, Backoff: backoff.Constant{Interval: c.backoff}, Clock: bubbleClock{}, Nested: retry.NestedOneLayer}
	h := &hedge.Hedger{Policy: p, Delay: c.delay, MaxHedges: c.maxHedges}
	ctx := context.Background()
	if c.inbound {
		ctx = retry.WithInbound(ctx, retry.Inbound{Attempt: 1, Retries: true})
	}
	seq := 0
	_, err := hedge.Do(ctx, h, func(ctx context.Context) (int, error) {
		n, _, ok := hedge.AttemptOf(ctx)
		if !ok { // NoHedges: retry.Do, one attempt at a time
			seq++
			n = seq
		}
		rec(n, "start")
		st := c.steps[n-1]
		tm := time.NewTimer(st.d)
		defer tm.Stop()
		select {
		case <-tm.C:
			if st.fail {
				rec(n, "fail")
				return 0, errScripted
			}
			rec(n, "ok")
			return 1, nil
		case <-ctx.Done():
			rec(n, "cancel")
			return 0, ctx.Err()
		}
	}, nil)
	if err != nil {
		rec(0, "call failed")
	} else {
		rec(0, "call ok")
	}
	sortEvents(evs)
	return evs
}

// simHedge runs c through the simulator's rule: one call, network legs of
// 0, the scripted attempts at the last tier. With inbound, a front tier
// serves a client that retries (MaxAttempts 2: it announces Will-Retry)
// and makes the hedged call under the layer rule.
func simHedge(t *testing.T, c hedgeRuleCase) []hedgeEvent {
	t.Helper()
	var evs []hedgeEvent
	t0 := time.Duration(-1)
	last := 0
	starts := map[int]time.Duration{}
	cancelled := map[int]bool{}
	m := Model{
		Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: 10 * time.Second},
		Duration: 10 * time.Second, Drain: 10 * time.Second,
		Tiers: []Tier{{Name: "service"}},
	}
	hp := Policy{Name: "hedged", MaxAttempts: c.limit, LayerRule: true, Hedge: &Hedge{Delay: c.delay, MaxHedges: c.maxHedges},
		Backoff: func(rand.Source) backoff.Strategy { return backoff.Constant{Interval: c.backoff} }}
	v := Variant{Name: "hedged", Policies: []Policy{hp}}
	if c.inbound {
		last = 1
		m.Tiers = []Tier{{Name: "front"}, {Name: "service"}}
		v.Policies = []Policy{{Name: "client", MaxAttempts: 2}, hp}
	}
	m.hooks = &simHooks{
		service: func(now time.Duration, tier, n int) (time.Duration, bool) {
			if tier != last {
				return 0, false
			}
			if t0 < 0 {
				t0 = now
			}
			starts[n] = now - t0
			evs = append(evs, hedgeEvent{now - t0, n, "start"})
			return c.steps[n-1].d, c.steps[n-1].fail
		},
		cancelled: func(now time.Duration, tier, n int) {
			if tier == last {
				cancelled[n] = true
				evs = append(evs, hedgeEvent{now - t0, n, "cancel"})
			}
		},
	}
	res, err := Run(&m, v, 1)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Duration(0)
	for n, at := range starts {
		if !cancelled[n] {
			st := c.steps[n-1]
			what := "ok"
			if st.fail {
				what = "fail"
			}
			evs = append(evs, hedgeEvent{at + st.d, n, what})
			end = max(end, at+st.d)
		}
	}
	if res.Metrics.Succeeded == 1 {
		evs = append(evs, hedgeEvent{end, 0, "call ok"})
	} else {
		evs = append(evs, hedgeEvent{end, 0, "call failed"})
	}
	sortEvents(evs)
	return evs
}

// Issue 33, items 3 to 5: the simulator's hedging is hedge.Hedger's rule,
// checked against the real hedge.Do on the same scripted attempts: each
// round of attempts (the first, or a retry) has a timer of its own, so a
// first attempt that fails fast does not let the old timer hedge the
// retry early; a retry is hedged while hedges remain; the layer rule
// forbids hedging a call whose inbound caller retries; and the losers
// are cancelled when the winner answers.
func TestHedgeRuleMatchesHedgeDo(t *testing.T) {
	ms := time.Millisecond
	ok := func(d int) hedgeStep { return hedgeStep{d: time.Duration(d) * ms} }
	fail := func(d int) hedgeStep { return hedgeStep{d: time.Duration(d) * ms, fail: true} }
	cases := []hedgeRuleCase{
		{name: "first answers before the delay", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(5)}},
		{name: "the hedge wins, the first is cancelled", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(50), ok(5)}},
		{name: "the first wins, the hedge is cancelled", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(30), ok(50)}},
		{name: "a fast failure: the retry has its own timer", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{fail(2), ok(30), ok(4)}},
		{name: "a failed first waits for its hedge", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{fail(15), ok(30)}},
		{name: "both fail: the retry is not hedged when no hedge is left", maxHedges: 1, limit: 4, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{fail(50), fail(20), ok(30)}},
		{name: "a retry is hedged", maxHedges: 2, limit: 4, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{fail(2), ok(50), ok(5)}},
		{name: "two hedges", maxHedges: 2, limit: 4, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(50), ok(45), ok(5)}},
		{name: "the attempt limit leaves no hedge", maxHedges: 1, limit: 1, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(50)}},
		{name: "the attempt limit counts hedges", maxHedges: 1, limit: 2, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{fail(30), fail(25), ok(5)}},
		{name: "no hedges", maxHedges: hedge.NoHedges, limit: 2, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(50)}},
		{name: "the layer rule: the inbound caller retries", maxHedges: 1, limit: 3, delay: 10 * ms, backoff: 5 * ms, steps: []hedgeStep{ok(50), ok(5)}, inbound: true},
	}
	lib := libraryHedge(t, cases)
	for i, c := range cases {
		if got := simHedge(t, c); fmt.Sprint(lib[i]) != fmt.Sprint(got) {
			t.Errorf("%s:\nhedge.Do:  %v\nsimulator: %v", c.name, lib[i], got)
		}
	}
}

// Issue 33, item 4: a front hop under the layer rule does not hedge the
// calls of a client that retries (hedge.Hedger asks NestedForbids): one
// attempt per call reaches the back tier, not two.
func TestHedgedHopObeysTheLayerRule(t *testing.T) {
	m := Model{
		Clients: 5, Arrival: Arrival{Kind: Poisson, Rate: 20}, Duration: 10 * time.Second, Drain: 5 * time.Second,
		Tiers: []Tier{{Name: "front", Service: Const(time.Millisecond)}, {Name: "back", Service: Const(50 * time.Millisecond)}},
	}
	for _, c := range []struct {
		clientAttempts int
		want           float64
	}{{2, 1}, {1, 2}} { // a client that retries announces it; one that cannot does not
		v := Variant{Name: "front-hedges", Policies: []Policy{
			{Name: "client", MaxAttempts: c.clientAttempts},
			{Name: "front", MaxAttempts: 2, LayerRule: true, Hedge: &Hedge{Delay: 10 * time.Millisecond}},
		}}
		res, err := Run(&m, v, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Metrics.AttemptsPerCall; got != c.want {
			t.Errorf("client making %d attempts: %.2f attempts per call at the back tier, want %v", c.clientAttempts, got, c.want)
		}
	}
}

// Issue 33, item 5: a hedge's loser is cancelled and frees its worker, as
// hedge.Transport cancels its losers' requests. With 25 workers for the
// straggler workload (about 19 busy on average), abandoned losers used to
// hold their workers until the queue grew without bound (p50 7.1s, a
// queue of 24,635) while no hedging kept p99 at 171ms.
func TestHedgeLosersFreeTheirWorkers(t *testing.T) {
	spec := stragglerSpec()
	m := copyModel(spec.Model)
	m.Tiers[0].Workers, m.Duration = 25, 20*time.Second
	custom := map[string]Variant{}
	for _, v := range spec.Custom {
		custom[v.Name] = v
	}
	none, err := Run(&m, custom[PolicyNoHedge], 1)
	if err != nil {
		t.Fatal(err)
	}
	hedged, err := Run(&m, custom[PolicyHedgeP95], 1)
	if err != nil {
		t.Fatal(err)
	}
	h, n := hedged.Metrics, none.Metrics
	if h.P50ms > 2*n.P50ms || h.PeakQueue > 10*max(n.PeakQueue, 25) || h.P999ms > n.P999ms {
		t.Errorf("hedged at p95 with 25 workers: p50 %s, p99.9 %s, queue %.0f; without hedging p50 %s, p99.9 %s, queue %.0f",
			FormatMS(h.P50ms), FormatMS(h.P999ms), h.PeakQueue, FormatMS(n.P50ms), FormatMS(n.P999ms), n.PeakQueue)
	}
	t.Logf("hedged: p50 %s p99 %s p99.9 %s queue %.0f; none: p50 %s p99 %s p99.9 %s queue %.0f", FormatMS(h.P50ms), FormatMS(h.P99ms), FormatMS(h.P999ms), h.PeakQueue,
		FormatMS(n.P50ms), FormatMS(n.P99ms), FormatMS(n.P999ms), n.PeakQueue)
}
