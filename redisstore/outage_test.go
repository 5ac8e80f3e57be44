package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// logCapture is a slog.Handler that keeps the records.
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func (h *logCapture) count(level slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level {
			n++
		}
	}
	return n
}

// degradedLog records OnDegraded calls.
type degradedLog struct {
	mu    sync.Mutex
	calls []bool
}

func (d *degradedLog) on(degraded bool, err error) {
	d.mu.Lock()
	d.calls = append(d.calls, degraded && err != nil)
	d.mu.Unlock()
}

func (d *degradedLog) get() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]bool(nil), d.calls...)
}

// traffic makes calls through b from 2 goroutines until stop is called
// (at most 5 million calls or 60 seconds each) and measures the longest
// call.
type traffic struct {
	stop     atomic.Bool
	wg       sync.WaitGroup
	calls    atomic.Int64
	refused  atomic.Int64
	maxNanos atomic.Int64
}

func startTraffic(b *Breaker, bu *Budget) *traffic {
	tr := &traffic{}
	for range 2 {
		tr.wg.Go(func() {
			end := time.Now().Add(time.Minute)
			for i := 0; i < 5_000_000 && !tr.stop.Load() && (i%1024 != 0 || time.Now().Before(end)); i++ {
				start := time.Now()
				done, err := b.Allow()
				if err == nil {
					done(nil)
				} else {
					tr.refused.Add(1)
				}
				bu.Record(false, nil)
				bu.Withdraw(errDown)
				d := time.Since(start).Nanoseconds()
				for {
					m := tr.maxNanos.Load()
					if d <= m || tr.maxNanos.CompareAndSwap(m, d) {
						break
					}
				}
				tr.calls.Add(1)
			}
		})
	}
	return tr
}

func (tr *traffic) finish() { tr.stop.Store(true); tr.wg.Wait() }

// outageSlack is added to Timeout in the latency bounds: scheduling on a
// loaded machine under the race detector, never a wait the code chooses.
const outageSlack = 250 * time.Millisecond

// TestOutageFallsBackAndRejoins: Redis is killed while calls run. Calls
// keep flowing on local state and none waits longer than the Redis
// timeout; the loss is logged once and counted; the local breaker then
// decides alone. When Redis is back on the same port the processes re-join
// and share state again: the trip A's local breaker made during the outage
// reaches Redis and opens the breaker for B.
func TestOutageFallsBackAndRejoins(t *testing.T) {
	srv := ownRedis(t)
	logs := &logCapture{}
	var onDeg degradedLog
	const timeout = 50 * time.Millisecond
	bcfg := BreakerConfig{
		Name:            "inventory",
		Namespace:       namespace(t),
		Breaker:         breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		RefreshInterval: 20 * time.Millisecond,
		Timeout:         timeout,
		Logger:          slog.New(logs),
		OnDegraded:      onDeg.on,
	}
	var bs []*Breaker
	var budgets []*Budget
	for range 2 {
		c := bcfg
		c.Client = newClient(t, srv.addr)
		b, err := NewBreaker(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
		bu, err := NewBudget(BudgetConfig{
			Client: c.Client, Name: "inventory", Namespace: bcfg.Namespace,
			RefreshInterval: 20 * time.Millisecond, Timeout: timeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bu.Close)
		budgets = append(budgets, bu)
	}
	a, b := bs[0], bs[1]
	for _, x := range bs {
		waitFor(t, "the breakers to join", func() bool { return x.Stats().Syncs > 0 && x.snap.Load().shared })
	}
	for _, x := range budgets {
		waitFor(t, "the budgets to join", func() bool { return x.Stats().Link.Syncs > 0 && x.joined.Load() })
	}

	tr := startTraffic(a, budgets[0])
	waitFor(t, "calls to flow", func() bool { return tr.calls.Load() > 100 })
	srv.kill()
	waitFor(t, "both processes to fall back", func() bool {
		return a.Stats().Degraded && b.Stats().Degraded &&
			budgets[0].Stats().Link.Degraded && budgets[1].Stats().Link.Degraded
	})
	before := tr.calls.Load()
	waitFor(t, "calls to flow on local state", func() bool { return tr.calls.Load() > before+2000 })
	waitFor(t, "several failed exchanges", func() bool { return a.Stats().RedisErrors >= 5 })
	tr.finish()
	maxCall := time.Duration(tr.maxNanos.Load())
	t.Logf("outage: %d calls, longest %v (Redis timeout %v); A's link %+v", tr.calls.Load(), maxCall, timeout, a.Stats())
	if n := tr.refused.Load(); n != 0 {
		t.Fatalf("%d calls refused by a closed breaker during the outage", n)
	}
	if maxCall > timeout+outageSlack {
		t.Fatalf("a call took %v during the outage, above the Redis timeout %v (+%v slack)", maxCall, timeout, outageSlack)
	}
	if st := a.Stats(); st.Fallbacks != 1 {
		t.Fatalf("A's stats %+v: want exactly one fallback for one outage", st)
	}
	// 2 breakers + 0 budgets log through logs: one warning each.
	if n := logs.count(slog.LevelWarn); n != 2 {
		t.Fatalf("%d warnings logged for one outage of 2 breakers, want 2 (once each)", n)
	}

	// On local state, A's failures open A only.
	for range 5 {
		_ = call(a, errDown)
	}
	wantState(t, a, breaker.Open)
	wantState(t, b, breaker.Closed)
	// B's private bucket starts with what B could spend from the shared
	// bucket when it last reached it.
	n := int(budgets[1].Available())
	if n < 1 || n > 10 {
		t.Fatalf("B's private budget holds %v tokens", budgets[1].Available())
	}
	for i := range n {
		if !budgets[1].Withdraw(errDown) {
			t.Fatalf("B's private budget refused retry %d of %d during the outage", i, n)
		}
	}
	if budgets[1].Withdraw(errDown) {
		t.Fatalf("B's private budget granted retry %d", n+1)
	}

	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both processes to re-join", func() bool {
		return !a.Stats().Degraded && !b.Stats().Degraded && !budgets[0].Stats().Link.Degraded
	})
	if n := logs.count(slog.LevelInfo); n != 2 {
		t.Fatalf("%d re-join messages logged, want 2", n)
	}
	if got := onDeg.get(); len(got) != 4 || !got[0] || !got[1] || got[2] || got[3] {
		t.Fatalf("OnDegraded calls = %v, want [true true false false]", got)
	}
	// A's local trip during the outage reaches the restarted Redis, and
	// opens the breaker for B too.
	waitFor(t, "A's local trip to open the breaker for B", func() bool { return b.State() == breaker.Open })
	wantState(t, a, breaker.Open)
	waitFor(t, "the budget's lease", func() bool { return budgets[1].Lease() > 0 })
}

// TestOutageSlowRedis: Redis stops answering (SIGSTOP) while a process
// asks it for a probe permit: the call waits at most the timeout, then
// the process falls back; it re-joins when Redis answers again.
func TestOutageSlowRedis(t *testing.T) {
	srv := ownRedis(t)
	fc := clocktest.NewFake()
	const timeout = 100 * time.Millisecond
	a, err := NewBreaker(BreakerConfig{
		Client:          newClient(t, srv.addr),
		Name:            "ledger",
		Namespace:       namespace(t),
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: time.Second,
		Timeout:         timeout,
		Clock:           fc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	waitFor(t, "the first exchange", func() bool { return a.Stats().Syncs > 0 })
	fc.BlockUntil(1)
	_ = call(a, errDown)
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	fc.Advance(time.Minute)
	fc.BlockUntil(1)

	srv.pause()
	start := time.Now()
	done, err := a.Allow() // asks Redis for the probe permit
	took := time.Since(start)
	srv.resume()
	if took > timeout+outageSlack {
		t.Fatalf("Allow waited %v on a stopped Redis, above the timeout %v (+%v slack)", took, timeout, outageSlack)
	}
	if err != nil {
		t.Fatalf("Allow on a stopped Redis = %v, want the local breaker's admission", err)
	}
	done(nil)
	if st := a.Stats(); !st.Degraded || st.Fallbacks != 1 {
		t.Fatalf("stats after the timeout = %+v, want degraded", st)
	}
	mustSync(t, a) // Redis answers again
	if st := a.Stats(); st.Degraded {
		t.Fatalf("stats after Redis answered = %+v", st)
	}
	// The permit asked for while Redis was stopped may have been granted
	// after all; its lease frees it.
	fc.Advance(DefaultProbeLease)
	mustSync(t, a)
	wantState(t, a, breaker.HalfOpen)
	if err := call(a, nil); err != nil {
		t.Fatalf("probe after re-joining refused: %v", err)
	}
	wantState(t, a, breaker.Closed)
}

// TestUnreachableAtStart: with no Redis at all, the process serves on
// local state from the start, and Sync reports why.
func TestUnreachableAtStart(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logs := &logCapture{}
	fc := clocktest.NewFake()
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, addr), Name: "x", Logger: slog.New(logs), Clock: fc,
		Breaker: breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bu, err := NewBudget(BudgetConfig{Client: newClient(t, addr), Name: "x", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer bu.Close()
	for range 3 {
		if err := b.Sync(context.Background()); err == nil {
			t.Fatal("Sync succeeded without a Redis")
		}
	}
	if err := bu.Sync(context.Background()); err == nil {
		t.Fatal("budget Sync succeeded without a Redis")
	}
	if st := b.Stats(); !st.Degraded || st.Fallbacks != 1 || st.RedisErrors < 3 || st.Syncs != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if n := logs.count(slog.LevelWarn); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
	_ = call(b, errDown)
	_ = call(b, errDown)
	if err := call(b, nil); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("local breaker after 2 failures: %v, want ErrOpen", err)
	}
	for i := range 10 {
		if !bu.Withdraw(errDown) {
			t.Fatalf("private budget refused retry %d of its 10 tokens", i)
		}
	}
	if bu.Withdraw(errDown) {
		t.Fatal("private budget granted an 11th retry")
	}
	if got := bu.Available(); got != 0 {
		t.Fatalf("Available = %v, want the private budget's 0", got)
	}
	if st := bu.Stats(); st.Granted != 10 || st.Refused != 1 || !st.Link.Degraded {
		t.Fatalf("budget stats = %+v", st)
	}
}
