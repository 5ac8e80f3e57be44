package hedge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// A copy's Retry-After holds even when another copy fails after it
// without advice: the retry waits the longest advice of the round.
func TestHedgeRetryAfterOfEarlierCopyHolds(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := policy(clk, ev)
	p.MaxRetryAfter = 2 * time.Minute
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", retry.After(errors.New("busy"), time.Minute))
	ev.waitFor(t, "end#1:")
	s.answer(2, "v2", errors.New("boom"))
	ev.waitFor(t, "retry#3")
	clk.BlockUntil(1)
	if d := clk.Deadlines(); len(d) != 1 || d[0] < time.Minute {
		t.Fatalf("the retry waits %v, want at least the advised 1m", d)
	}
	clk.Advance(2 * time.Minute)
	s.wait(t, 3)
	s.answer(3, "v3", nil)
	if r := get(t, out); r.v != "v3" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
}

// Advice beyond MaxRetryAfter stops further hedges, as it stops a retry:
// coming back at the cap would be sooner than the server asked.
func TestHedgeAdviceBeyondCapStopsHedges(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := policy(clk, ev)
	p.MaxRetryAfter = 30 * time.Second
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 3}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", retry.After(errors.New("busy"), time.Minute))
	ev.waitFor(t, "end#1:")
	clk.Advance(time.Hour)
	s.noStart(t)
	s.answer(2, "v2", errors.New("boom"))
	r := get(t, out)
	if !errors.Is(r.err, retry.ErrAdviceExceedsCap) {
		t.Fatalf("Do = %q, %v; want ErrAdviceExceedsCap", r.v, r.err)
	}
	if log := ev.String(); strings.Contains(log, "start#3") {
		t.Fatalf("a hedge started after advice beyond the cap: %s", log)
	}
}

// A later copy's shorter advice does not bring the next hedge forward
// past an earlier copy's longer advice.
func TestHedgeShorterAdviceKeepsLongerDelay(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := policy(clk, ev)
	p.MaxAttempts = 10
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, MaxHedges: 3}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	s.wait(t, 2)
	s.answer(1, "v1", retry.After(errors.New("busy"), 20*time.Second))
	ev.waitFor(t, "end#1:")
	s.answer(2, "v2", retry.After(errors.New("busy"), time.Second))
	ev.waitFor(t, "end#2:")
	// Both failed: the round is over, and the retry waits the longest
	// advice of its copies.
	ev.waitFor(t, "retry#3")
	clk.BlockUntil(1)
	if d := clk.Deadlines(); len(d) != 1 || d[0] < 20*time.Second {
		t.Fatalf("the retry waits %v, want at least 20s", d)
	}
	clk.Advance(time.Minute)
	s.wait(t, 3)
	s.answer(3, "v3", nil)
	if r := get(t, out); r.v != "v3" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
}

// Hedges respect Policy.MaxElapsed: no hedge starts past start+MaxElapsed.
func TestHedgeRespectsMaxElapsed(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := policy(clk, ev)
	p.MaxElapsed = 5 * time.Millisecond
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	ev.waitFor(t, "refused:")
	s.noStart(t)
	s.answer(1, "v1", nil)
	if r := get(t, out); r.v != "v1" || r.err != nil {
		t.Fatalf("Do = %q, %v", r.v, r.err)
	}
	if log := ev.String(); !strings.Contains(log, "refused:deadline") {
		t.Fatalf("events %s, want the hedge refused for the deadline", log)
	}
}
