package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

var errDown = errors.New("downstream failed")

const testInterval = 100 * time.Millisecond

// fleet is a set of Breakers, each with its own Redis client (its own
// connections), sharing one state, on one fake clock.
type fleet struct {
	fc  *clocktest.Fake
	bs  []*Breaker
	cfg BreakerConfig
}

// newFleet makes n Breakers sharing one name on the shared redis-server,
// and waits until each has joined the shared state and its background
// loop is waiting for the clock.
func newFleet(t *testing.T, n int, bc breaker.Config) *fleet {
	t.Helper()
	srv := sharedRedis(t)
	return newFleetOn(t, srv.addr, n, bc)
}

func newFleetOn(t *testing.T, addr string, n int, bc breaker.Config) *fleet {
	t.Helper()
	fc := clocktest.NewFake()
	if bc.OpenJitter == 0 {
		bc.OpenJitter = -1
	}
	f := &fleet{fc: fc, cfg: BreakerConfig{
		Name:            "payments",
		Namespace:       namespace(t),
		Breaker:         bc,
		RefreshInterval: testInterval,
		Timeout:         testInterval,
		Clock:           fc,
	}}
	for range n {
		c := f.cfg
		c.Client = newClient(t, addr)
		b, err := NewBreaker(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		f.bs = append(f.bs, b)
	}
	for i, b := range f.bs {
		waitFor(t, "the first exchange of breaker "+string(rune('A'+i)), func() bool { return b.Stats().Syncs >= 1 })
	}
	fc.BlockUntil(n) // every loop waits for its next refresh
	return f
}

// refresh waits until every background loop is waiting for its next
// refresh, then moves the clock one refresh interval on: every process
// refreshes its cached state once.
func (f *fleet) refresh() {
	f.fc.BlockUntil(len(f.bs))
	f.fc.Advance(testInterval)
}

// call makes one call through b and reports Allow's error.
func call(b interface{ Allow() (func(error), error) }, err error) error {
	done, aerr := b.Allow()
	if aerr != nil {
		return aerr
	}
	done(err)
	return nil
}

func mustSync(t *testing.T, b *Breaker) {
	t.Helper()
	if err := b.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func wantState(t *testing.T, b *Breaker, want breaker.State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// TestFleetOpensWithinRefreshInterval: failures seen by one process open
// the breaker for every process within one refresh interval.
func TestFleetOpensWithinRefreshInterval(t *testing.T) {
	f := newFleet(t, 3, breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	a, b, c := f.bs[0], f.bs[1], f.bs[2]
	for i := range 5 {
		if err := call(a, errDown); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	mustSync(t, a) // the background loop would do it within RefreshInterval/10
	wantState(t, a, breaker.Open)
	if err := call(a, nil); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("A.Allow after the trip = %v, want ErrOpen", err)
	}
	// B and C act on their cached state until their next refresh.
	wantState(t, b, breaker.Closed)
	wantState(t, c, breaker.Closed)

	f.refresh()
	for _, x := range []*Breaker{b, c} {
		waitFor(t, "the refresh to open the breaker", func() bool { return x.State() == breaker.Open })
		if err := call(x, nil); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow after the refresh = %v, want ErrOpen", err)
		}
	}
}

// TestFleetConsecutiveRunsAcrossProcesses: the consecutive-failures
// condition counts failures in a row fleet-wide, and a success anywhere in
// the fleet ends the run.
func TestFleetConsecutiveRunsAcrossProcesses(t *testing.T) {
	f := newFleet(t, 3, breaker.Config{ConsecutiveFailures: 6, OpenTimeout: time.Minute})
	a, b, c := f.bs[0], f.bs[1], f.bs[2]
	for range 2 {
		_ = call(a, errDown)
		_ = call(b, errDown)
	}
	mustSync(t, a)
	mustSync(t, b)
	if got := b.Counts().ConsecutiveFailures; got != 4 {
		t.Fatalf("fleet ConsecutiveFailures = %d, want 4", got)
	}
	_ = call(c, nil) // a success ends the run
	_ = call(c, errDown)
	mustSync(t, c)
	if got := c.Counts().ConsecutiveFailures; got != 1 {
		t.Fatalf("fleet ConsecutiveFailures after a success = %d, want 1", got)
	}
	for range 5 {
		_ = call(a, errDown)
	}
	mustSync(t, a)
	wantState(t, a, breaker.Open)
}

// TestFleetWindowAggregates: with a time window, the failure rate is that
// of the whole fleet: no process alone has MinCalls calls, together they
// trip the breaker.
func TestFleetWindowAggregates(t *testing.T) {
	f := newFleet(t, 3, breaker.Config{
		Window:      breaker.Window{Duration: 10 * time.Second, MinCalls: 20, FailureRatio: 0.5},
		OpenTimeout: time.Minute,
	})
	for i, x := range f.bs {
		for j := range 8 {
			var err error
			if j < 5 {
				err = errDown
			}
			if aerr := call(x, err); aerr != nil {
				t.Fatalf("process %d call %d: %v", i, j, aerr)
			}
		}
		mustSync(t, x)
		want := breaker.Closed
		if i == 2 {
			want = breaker.Open // 24 calls, 15 failures: 62% >= 50%
		}
		wantState(t, x, want)
	}
	// The window slides: after it, the same failures count no more.
	f.fc.Advance(time.Minute) // the open period ends
	done, err := f.bs[0].Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	done(nil)
	wantState(t, f.bs[0], breaker.Closed)
	mustSync(t, f.bs[1])
	if c := f.bs[1].Counts(); c.Calls() != 0 {
		t.Fatalf("counts after closing = %+v, want a fresh window", c)
	}
}

// TestFleetWindowSlides: outcomes older than the window are forgotten.
func TestFleetWindowSlides(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{
		Window:      breaker.Window{Duration: 10 * time.Second, Buckets: 10, MinCalls: 10, FailureRatio: 0.5},
		OpenTimeout: time.Minute,
	})
	a, b := f.bs[0], f.bs[1]
	for range 9 {
		_ = call(a, errDown)
	}
	mustSync(t, a)
	if got := a.Counts().Failures; got != 9 {
		t.Fatalf("window failures = %d, want 9", got)
	}
	f.fc.Advance(11 * time.Second)
	_ = call(b, errDown)
	mustSync(t, b)
	if c := b.Counts(); c.Failures != 1 {
		t.Fatalf("window after it slid = %+v, want only the new failure", c)
	}
	wantState(t, b, breaker.Closed)
}

// TestFleetSingleProbe: in the half-open state exactly one call in the
// whole fleet is let through, and its success closes the breaker for all.
func TestFleetSingleProbe(t *testing.T) {
	f := newFleet(t, 3, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute})
	for range 3 {
		_ = call(f.bs[0], errDown)
	}
	mustSync(t, f.bs[0])
	for _, x := range f.bs[1:] {
		mustSync(t, x)
		wantState(t, x, breaker.Open)
	}
	f.fc.Advance(time.Minute)

	const perProcess = 16
	var (
		mu       sync.Mutex
		admitted []func(error)
		refused  = map[error]int{}
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for _, x := range f.bs {
		for range perProcess {
			wg.Go(func() {
				<-start
				done, err := x.Allow()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused[err]++
					return
				}
				admitted = append(admitted, done)
			})
		}
	}
	close(start)
	wg.Wait()
	if len(admitted) != 1 {
		t.Fatalf("%d probes admitted fleet-wide, want exactly 1 (refusals: %v)", len(admitted), refused)
	}
	if n := refused[breaker.ErrTooManyProbes]; n != 3*perProcess-1 {
		t.Fatalf("refusals = %v, want %d ErrTooManyProbes", refused, 3*perProcess-1)
	}
	// Further calls are refused without a round trip until the probe ends.
	for i, x := range f.bs {
		if err := x.Ready(); !errors.Is(err, breaker.ErrTooManyProbes) {
			t.Fatalf("process %d: Ready during the probe = %v (snapshot %+v), want ErrTooManyProbes", i, err, *x.snap.Load())
		}
	}
	admitted[0](nil)
	f.refresh()
	for _, x := range f.bs {
		waitFor(t, "every process to see the breaker closed", func() bool { return x.State() == breaker.Closed })
		if err := call(x, nil); err != nil {
			t.Fatalf("Allow after the probe succeeded: %v", err)
		}
	}
}

// TestFleetProbeFailureReopens: a failed probe reopens the breaker for a
// longer period (MaxOpenTimeout growth) fleet-wide.
func TestFleetProbeFailureReopens(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: 10 * time.Second, MaxOpenTimeout: time.Minute,
	})
	a, b := f.bs[0], f.bs[1]
	_ = call(a, errDown)
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	f.fc.Advance(10 * time.Second)
	mustSync(t, b)
	wantState(t, b, breaker.HalfOpen)
	if err := call(b, errDown); err != nil { // the probe, failing
		t.Fatalf("probe refused: %v", err)
	}
	wantState(t, b, breaker.Open)
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	f.fc.Advance(19 * time.Second) // the second period is 20s
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	f.fc.Advance(time.Second)
	mustSync(t, a)
	wantState(t, a, breaker.HalfOpen)
	if err := call(a, nil); err != nil {
		t.Fatalf("second probe refused: %v", err)
	}
	wantState(t, a, breaker.Closed)
}

// TestFleetProbeLeaseExpires: a process that took the probe permit and
// never reported (it crashed) holds it only for ProbeLease; its late
// report changes nothing.
func TestFleetProbeLeaseExpires(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute})
	a, b := f.bs[0], f.bs[1]
	_ = call(a, errDown)
	mustSync(t, a)
	f.fc.Advance(time.Minute)
	mustSync(t, b)
	lost, err := a.Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	if err := call(b, nil); !errors.Is(err, breaker.ErrTooManyProbes) {
		t.Fatalf("second probe = %v, want ErrTooManyProbes", err)
	}
	f.fc.Advance(DefaultProbeLease)
	mustSync(t, b)
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("probe after the lease ran out refused: %v", err)
	}
	lost(nil) // too late: ignored
	mustSync(t, a)
	wantState(t, a, breaker.HalfOpen)
	done(nil)
	wantState(t, b, breaker.Closed)
}

// TestFleetStaleGenerationIgnored: results of calls admitted before the
// shared state changed do not count in the new state.
func TestFleetStaleGenerationIgnored(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute})
	a, b := f.bs[0], f.bs[1]
	var old []func(error)
	for range 3 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, done)
	}
	for range 3 {
		_ = call(a, errDown)
	}
	mustSync(t, a)
	f.fc.Advance(time.Minute)
	if err := call(a, nil); err != nil { // the probe closes it again
		t.Fatal(err)
	}
	mustSync(t, b)
	wantState(t, b, breaker.Closed)
	for _, done := range old {
		done(errDown)
	}
	mustSync(t, b)
	if c := b.Counts(); c.Failures != 0 || c.ConsecutiveFailures != 0 {
		t.Fatalf("counts = %+v: failures of an earlier generation counted", c)
	}
	wantState(t, b, breaker.Closed)
}

// TestFleetListeners: Subscribe and Config.OnStateChange hear the shared
// transitions this process observes, in order.
func TestFleetListeners(t *testing.T) {
	var mu sync.Mutex
	var viaConfig, viaSubscribe []string
	f := newFleet(t, 1, breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: time.Minute,
		OnStateChange: func(from, to breaker.State) {
			mu.Lock()
			viaConfig = append(viaConfig, from.String()+">"+to.String())
			mu.Unlock()
		},
	})
	a := f.bs[0]
	unsub := a.Subscribe(func(from, to breaker.State) {
		mu.Lock()
		viaSubscribe = append(viaSubscribe, from.String()+">"+to.String())
		mu.Unlock()
	})
	_ = call(a, errDown)
	mustSync(t, a)
	f.fc.Advance(time.Minute)
	mustSync(t, a)
	if err := call(a, nil); err != nil {
		t.Fatal(err)
	}
	unsub()
	_ = call(a, errDown)
	mustSync(t, a)
	mu.Lock()
	defer mu.Unlock()
	want := "[closed>open open>half-open half-open>closed]"
	if got := fmtList(viaSubscribe); got != want {
		t.Fatalf("Subscribe heard %s, want %s", got, want)
	}
	if got, want := fmtList(viaConfig), "[closed>open open>half-open half-open>closed closed>open]"; got != want {
		t.Fatalf("OnStateChange heard %s, want %s", got, want)
	}
}

func fmtList(xs []string) string {
	s := "["
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s + "]"
}

// TestFleetSlowCalls: with a slow-call rate condition, calls timed on the
// clock count as slow fleet-wide.
func TestFleetSlowCalls(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{
		Window: breaker.Window{
			Duration: time.Minute, MinCalls: 4,
			SlowCallDuration: time.Second, SlowCallRatio: 0.5,
		},
		OpenTimeout: time.Minute,
	})
	a, b := f.bs[0], f.bs[1]
	for _, x := range []*Breaker{a, b} {
		done1, err := x.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done2, err := x.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done1(nil)
		f.fc.Advance(2 * time.Second)
		done2(nil)
		mustSync(t, x)
	}
	// 4 calls, 2 slow: 50%.
	wantState(t, b, breaker.Open)
}

// TestBreakerSyncAfterClose: Sync reports ErrClosed after Close, and the
// nil Breaker admits everything.
func TestBreakerSyncAfterClose(t *testing.T) {
	f := newFleet(t, 1, breaker.Config{})
	a := f.bs[0]
	a.Close()
	a.Close()
	if err := a.Sync(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
	if err := call(a, nil); err != nil {
		t.Fatalf("Allow after Close: %v", err)
	}
}
