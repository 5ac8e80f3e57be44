package redisstore

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// Regression tests of the second outside review of redisstore (its
// integration tests, adapted): millisecond truncation, Clock and Rand
// panics around probes, fallback from a shared open or half-open state,
// and Redis keys shared by different names.

// countdownClock is a fake clock whose Now panics at the n-th call once
// armed (n counted from arming).
type countdownClock struct {
	*clocktest.Fake
	left atomic.Int32 // 0: disarmed
}

func (c *countdownClock) Now() time.Time {
	if c.left.Load() > 0 && c.left.Add(-1) == 0 {
		panic("Clock.Now panicked")
	}
	return c.Fake.Now()
}

// sinceClock is a fake clock whose Since panics while armed.
type sinceClock struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *sinceClock) Since(t time.Time) time.Duration {
	if c.armed.Load() {
		panic("Clock.Since panicked")
	}
	return c.Fake.Since(t)
}

// nowClock is a fake clock whose Now panics while armed.
type nowClock struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *nowClock) Now() time.Time {
	if c.armed.Load() {
		panic("Clock.Now panicked")
	}
	return c.Fake.Now()
}

// TestSubMillisecondProbeLeaseRefused: Redis counts leases in whole
// milliseconds, so a lease below 1ms (0ms there: every permit expired when
// granted, unlimited probes, no result counted) is refused, by
// BreakerConfig.Validate and through Store.ProbeLease.
func TestSubMillisecondProbeLeaseRefused(t *testing.T) {
	client := newClient(t, "127.0.0.1:1")
	for _, d := range []time.Duration{time.Nanosecond, 500 * time.Microsecond, time.Millisecond - 1} {
		err := BreakerConfig{Client: client, Name: "lease", ProbeLease: d}.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ProbeLease") {
			t.Errorf("ProbeLease %v: Validate = %v, want an ErrInvalidConfig naming ProbeLease", d, err)
		}
		st := &Store{Client: client, ProbeLease: d}
		if _, closeFn, err := st.SharedBreaker("lease", breaker.Config{}); !errors.Is(err, ErrInvalidConfig) {
			if closeFn != nil {
				closeFn()
			}
			t.Errorf("Store.ProbeLease %v: SharedBreaker = %v, want ErrInvalidConfig", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond} {
		if err := (BreakerConfig{Client: client, Name: "lease", ProbeLease: d}).Validate(); err != nil {
			t.Errorf("ProbeLease %v refused: %v", d, err)
		}
	}
}

// TestDurationsRoundedUpToWholeMilliseconds: every duration the scripts
// get in milliseconds is rounded up, not truncated: a 15ms window over 10
// buckets is 10 buckets of 2ms (truncated, 1ms: a 10ms window), and a
// lease or TTL of a fraction of a millisecond more is the next millisecond.
func TestDurationsRoundedUpToWholeMilliseconds(t *testing.T) {
	client := newClient(t, "127.0.0.1:1")
	s, err := BreakerConfig{
		Client: client, Name: "ms", ProbeLease: 1500 * time.Microsecond, KeyTTL: time.Hour + time.Microsecond,
		RefreshInterval: 100 * time.Millisecond,
		Breaker:         breaker.Config{Window: breaker.Window{Duration: 15 * time.Millisecond, Buckets: 10}},
	}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.width != 2*time.Millisecond || s.probeLease != 2*time.Millisecond || s.link.ttlMs != 3_600_001 {
		t.Errorf("bucket width %v, lease %v, TTL %dms; want 2ms, 2ms, 3600001ms", s.width, s.probeLease, s.link.ttlMs)
	}
	bs, err := BudgetConfig{Client: client, Name: "ms", KeyTTL: 2*time.Second - time.Nanosecond}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if bs.link.ttlMs != 2000 {
		t.Errorf("budget TTL %dms, want 2000ms", bs.link.ttlMs)
	}
	if ms := millisUp(1<<63 - 1); ms != (1<<63-1)/1_000_000+1 {
		t.Errorf("millisUp(the longest Duration) = %d", ms)
	}
	for _, d := range []time.Duration{0, time.Millisecond, 1<<63 - 1, 1<<63 - 1 - 999_999} {
		if got := ceilMillis(d); got%time.Millisecond != 0 || got < d-time.Millisecond || got < 0 {
			t.Errorf("ceilMillis(%v) = %v", d, got)
		}
	}
}

// TestProbeReportRandPanicReleasesPermit: the user's Rand panics while a
// probe's done reports the result. The panic goes on; the fleet-wide probe
// permit is returned (reported with a jitter draw of 0.5), so another
// process may probe at once rather than after ProbeLease.
func TestProbeReportRandPanicReleasesPermit(t *testing.T) {
	src := &panicky{}
	f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: 0.5, Rand: src})
	a, b := f.bs[0], f.bs[1]
	_ = call(a, errDown)
	mustSync(t, a)
	f.fc.Advance(2 * time.Minute)
	mustSync(t, a)
	mustSync(t, b)
	done, err := a.Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	src.armed.Store(true)
	mustPanicWith(t, func() { done(errDown) })
	src.armed.Store(false)
	mustSync(t, b)
	// The failed probe was reported: the breaker is open again, rather
	// than half-open with its one permit held for ProbeLease.
	if err := call(b, nil); err != breaker.ErrOpen {
		t.Fatalf("after a failed probe whose report's Rand panicked, another process's call = %v (state %v), want ErrOpen: the result was lost and the permit is held for ProbeLease (%v)", err, b.State(), DefaultProbeLease)
	}
}

// probeFleet makes two Breakers on clk that share a half-open state.
func probeFleet(t *testing.T, clk *countdownClock) (a, b *Breaker) {
	t.Helper()
	srv := sharedRedis(t)
	cfg := BreakerConfig{
		Name: "payments", Namespace: namespace(t),
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: testInterval, Clock: clk,
	}
	var bs []*Breaker
	for range 2 {
		c := cfg
		c.Client = newClient(t, srv.addr)
		b, err := NewBreaker(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
	}
	for _, x := range bs {
		waitFor(t, "first exchange", func() bool { return x.Stats().Syncs >= 1 })
	}
	clk.BlockUntil(2)
	_ = call(bs[0], errDown)
	mustSync(t, bs[0])
	clk.Advance(2 * time.Minute)
	clk.BlockUntil(2) // both loops done with the exchange the advance started
	mustSync(t, bs[0])
	mustSync(t, bs[1])
	wantState(t, bs[1], breaker.HalfOpen)
	return bs[0], bs[1]
}

// TestProbeClockPanicAfterGrantReleasesPermit: the Clock panics in Allow
// right after Redis granted the fleet-wide probe permit (reading the
// probe's start). The panic goes on and Allow returned no done, so nobody
// could report the probe: the permit is given back at once.
func TestProbeClockPanicAfterGrantReleasesPermit(t *testing.T) {
	clk := &countdownClock{Fake: clocktest.NewFake()}
	a, b := probeFleet(t, clk)
	clk.left.Store(2) // 1: the script's time; 2: the probe's start, after the grant
	mustPanicWith(t, func() { _, _ = a.Allow() })
	clk.left.Store(0)
	mustSync(t, b)
	if err := call(b, nil); err != nil {
		t.Fatalf("after Allow panicked past the grant, another process's probe = %v: the permit is held for ProbeLease (%v)", err, DefaultProbeLease)
	}
}

// TestProbeReportClockPanicReleasesPermit: the Clock panics as a probe's
// done reads the script's time. The result is reported with Redis's own
// time, so the permit is given back, and the panic goes on.
func TestProbeReportClockPanicReleasesPermit(t *testing.T) {
	clk := &countdownClock{Fake: clocktest.NewFake()}
	a, b := probeFleet(t, clk)
	done, err := a.Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	clk.left.Store(1) // the report's time
	mustPanicWith(t, func() { done(nil) })
	clk.left.Store(0)
	mustSync(t, b)
	// The successful probe closed the breaker, or at least freed the permit.
	if err := call(b, nil); err != nil {
		t.Fatalf("after a probe whose report's Clock panicked, another process's call = %v (state %v): the permit is held", err, b.State())
	}
}

// TestDegradedLocalProbeClockPanicFreesProbe: Redis is unreachable; the
// local breaker is half-open, and the Clock panics while Allow reads the
// call's start. The panic goes on, and no probe is held: an hour later a
// call is admitted (it once got ErrTooManyProbes for as long as Redis
// stayed down).
func TestDegradedLocalProbeClockPanicFreesProbe(t *testing.T) {
	fc := clocktest.NewFake()
	clk := &nowClock{Fake: fc}
	w := breaker.Window{Duration: 10 * time.Second, Buckets: 10, MinCalls: 1, FailureRatio: 0.5,
		SlowCallDuration: time.Second, SlowCallRatio: 1}
	local := breaker.Config{OpenTimeout: time.Minute, OpenJitter: -1, Window: w, Clock: fc}
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, "127.0.0.1:1"), Name: "down", Namespace: namespace(t), Clock: clk,
		Breaker: breaker.Config{OpenTimeout: time.Minute, OpenJitter: -1, Window: w},
		Local:   &local, RefreshInterval: testInterval, Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange to fail", func() bool { return b.Stats().RedisErrors >= 1 })
	_ = call(b, errDown)
	wantState(t, b, breaker.Open)
	fc.Advance(time.Minute)
	clk.armed.Store(true)
	mustPanicWith(t, func() { _, _ = b.Allow() })
	clk.armed.Store(false)
	fc.Advance(time.Hour)
	if _, err := b.Allow(); err != nil {
		t.Fatalf("an hour after a panicking Clock in Allow, with Redis down: Allow = %v (state %v): the local probe is leaked", err, b.State())
	}
}

// TestClockPanicInTimedDoneCountsFailure: the Clock panics while a closed
// shared breaker's done times a failed call (slow-call timing). The panic
// goes on, and the failure counts, as when IsFailure panics, and as
// breaker.Breaker counts it.
func TestClockPanicInTimedDoneCountsFailure(t *testing.T) {
	srv := sharedRedis(t)
	clk := &sinceClock{Fake: clocktest.NewFake()}
	bc := breaker.Config{OpenTimeout: time.Minute, OpenJitter: -1, Window: breaker.Window{
		Duration: 10 * time.Second, Buckets: 10, MinCalls: 1, FailureRatio: 0.5,
		SlowCallDuration: time.Second, SlowCallRatio: 1,
	}}
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, srv.addr), Name: "stock", Namespace: namespace(t), Clock: clk,
		Breaker: bc, RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	clk.BlockUntil(1)
	for _, callErr := range []error{errDown, nil} { // a success whose timing panicked is a failure too
		t.Run(map[bool]string{true: "failure", false: "success"}[callErr != nil], func(t *testing.T) {
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			clk.armed.Store(true)
			mustPanicWith(t, func() { done(callErr) })
			clk.armed.Store(false)
			mustSync(t, b)
			if st := b.State(); st != breaker.Open {
				t.Errorf("shared breaker after one call (MinCalls 1) whose done's Clock panicked: %v, counts %+v; want open", st, b.Counts())
			}
		})
		// Close it again for the next case: a fresh name.
		b.Close()
		b, err = NewBreaker(BreakerConfig{
			Client: newClient(t, srv.addr), Name: "stock2", Namespace: namespace(t), Clock: clk,
			Breaker: bc, RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	}
}

// degradedShared makes a Breaker whose shared state is half-open (or,
// with halfOpen false, open) when its own Redis is killed.
func degradedShared(t *testing.T, bc breaker.Config, halfOpen bool) (*Breaker, *clocktest.Fake) {
	t.Helper()
	srv := ownRedis(t)
	fc := clocktest.NewFake()
	bc.Clock = fc
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, srv.addr), Name: "stock", Namespace: namespace(t), Clock: fc,
		Breaker: bc, RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	fc.BlockUntil(1)
	_ = call(b, errDown)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
	if halfOpen {
		fc.Advance(bc.OpenTimeout)
		fc.BlockUntil(1)
		mustSync(t, b)
		wantState(t, b, breaker.HalfOpen)
	}
	srv.kill()
	if b.Sync(syncCtx(t)) == nil {
		t.Fatal("Sync succeeded with Redis down")
	}
	if !b.Stats().Degraded {
		t.Fatal("not degraded after a failed Sync")
	}
	return b, fc
}

// admitted counts the calls of n that Allow admits, leaving them in flight.
func admitted(b *Breaker, n int) (dones []func(error)) {
	for range n {
		if done, err := b.Allow(); err == nil {
			dones = append(dones, done)
		}
	}
	return dones
}

// TestFallbackFromHalfOpenCloses: SuccessThreshold successful local probes
// close the degraded breaker; the local breaker then admits every call.
func TestFallbackFromHalfOpenCloses(t *testing.T) {
	bc := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1, MaxProbes: 2, SuccessThreshold: 3}
	b, _ := degradedShared(t, bc, true)
	var mu sync.Mutex
	var events []breaker.State
	b.Subscribe(func(_, to breaker.State) { mu.Lock(); events = append(events, to); mu.Unlock() })
	dones := admitted(b, 20)
	if len(dones) != 2 {
		t.Fatalf("half-open with Redis down: %d of 20 concurrent calls admitted; want MaxProbes (2)", len(dones))
	}
	dones[0](nil)
	dones[1](nil)
	wantState(t, b, breaker.HalfOpen) // 2 of 3 successes
	dones = admitted(b, 20)
	if len(dones) != 2 {
		t.Fatalf("after two successes: %d of 20 admitted; want 2", len(dones))
	}
	dones[0](nil)
	wantState(t, b, breaker.Closed)
	dones[1](nil)
	if n := len(admitted(b, 20)); n != 20 {
		t.Fatalf("closed by local probes: %d of 20 admitted", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0] != breaker.Closed {
		t.Errorf("listener heard %v, want [closed]", events)
	}
}

// TestFallbackFromHalfOpenReopens: a failed local probe opens the degraded
// breaker again for the local OpenTimeout, then it is half-open again.
func TestFallbackFromHalfOpenReopens(t *testing.T) {
	bc := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1}
	b, fc := degradedShared(t, bc, true)
	dones := admitted(b, 20)
	if len(dones) != 1 {
		t.Fatalf("half-open with Redis down: %d of 20 admitted; want MaxProbes (1)", len(dones))
	}
	dones[0](errDown)
	wantState(t, b, breaker.Open)
	if _, err := b.Allow(); err != breaker.ErrOpen {
		t.Fatalf("after a failed local probe: Allow = %v, want ErrOpen", err)
	}
	fc.Advance(time.Minute - time.Millisecond)
	wantState(t, b, breaker.Open)
	fc.Advance(time.Millisecond)
	wantState(t, b, breaker.HalfOpen)
	if n := len(admitted(b, 20)); n != 1 {
		t.Fatalf("half-open again: %d of 20 admitted; want 1", n)
	}
}

// TestFallbackFromOpenGoesHalfOpen: Redis is lost while the fleet's
// breaker is open. The open period is honoured, and when it ends the
// process is half-open (MaxProbes probes), not closed.
func TestFallbackFromOpenGoesHalfOpen(t *testing.T) {
	bc := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1}
	b, fc := degradedShared(t, bc, false)
	wantState(t, b, breaker.Open)
	fc.Advance(time.Minute)
	wantState(t, b, breaker.HalfOpen)
	dones := admitted(b, 20)
	if len(dones) != 1 {
		t.Fatalf("open period over with Redis down: %d of 20 concurrent calls admitted (state %v); want MaxProbes (1)", len(dones), b.State())
	}
	dones[0](nil)
	wantState(t, b, breaker.Closed)
}

// TestNamesWithMemberMarkersRefused: keyed members' tags are NAME:=KEY and
// NAME:#HASH, so a Name (or Namespace) holding ":=" or ":#" is refused:
// two different names and keys never share Redis keys.
func TestNamesWithMemberMarkersRefused(t *testing.T) {
	client := newClient(t, "127.0.0.1:1")
	for _, bad := range []string{"api:=b", "api:#overflow", "a:#0123", ":="} {
		if err := (BreakerConfig{Client: client, Name: bad}).Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Name") {
			t.Errorf("BreakerConfig.Name %q: Validate = %v", bad, err)
		}
		if err := (BudgetConfig{Client: client, Name: bad}).Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("BudgetConfig.Name %q: Validate = %v", bad, err)
		}
		if err := (BreakerConfig{Client: client, Name: "api", Namespace: bad}).Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Namespace") {
			t.Errorf("BreakerConfig.Namespace %q: Validate = %v", bad, err)
		}
		if _, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{Client: client, Name: bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewKeyedBreakers Name %q: %v", bad, err)
		}
	}
	for _, good := range []string{"api", "api:v2", "api=b", "api#1", "api:"} {
		if err := (BreakerConfig{Client: client, Name: good}).Validate(); err != nil {
			t.Errorf("Name %q refused: %v", good, err)
		}
	}
	// Every accepted (name, key) pair has its own tag.
	names := []string{"api", "api:", "api:b", "a"}
	keys := []string{"", "b", ":=c", "b:=c", "=c", ":#overflow", "#overflow", "{x}", strings.Repeat("k", MaxVerbatimKey+1)}
	seen := map[string]string{}
	for _, n := range names {
		if err := (BudgetConfig{Client: client, Name: n}).Validate(); err != nil {
			t.Fatalf("Name %q refused: %v", n, err)
		}
		for _, k := range keys {
			for _, of := range []bool{false, true} {
				if of && k != "" {
					continue
				}
				tag := keyTag(n, k, of)
				id := n + "|" + k + "|" + map[bool]string{true: "overflow"}[of]
				if prev, ok := seen[tag]; ok {
					t.Errorf("%s and %s share the tag {%s}", prev, id, tag)
				}
				seen[tag] = id
			}
		}
	}
}
