package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// trips counts the script calls a client sends alone and the pipelines
// of script calls it sends.
type trips struct {
	single, pipelines, piped atomic.Int64
}

func (*trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			c.single.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if isScript(cmd) {
				n++
			}
		}
		if n > 0 {
			c.pipelines.Add(1)
			c.piped.Add(int64(n))
		}
		return next(ctx, cmds)
	}
}

// isScript tells the scripts' commands from a connection's set-up
// (HELLO, CLIENT SETINFO), which goes through the hooks too.
func isScript(cmd redis.Cmder) bool { n := cmd.Name(); return n == "evalsha" || n == "eval" }

func (c *trips) reset() { c.single.Store(0); c.pipelines.Store(0); c.piped.Store(0) }

// syncAllGroup makes KeyedBreakers of one name on client, on fc, with a
// refresh that never comes within a test: SyncAll makes every exchange.
func syncAllGroup(t *testing.T, client redis.Scripter, ns string, fc *clocktest.Fake, onMember func(Member, breaker.State, breaker.State)) *KeyedBreakers {
	t.Helper()
	k, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{
		Client: client, Name: "hosts", Namespace: ns, Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: time.Hour, Timeout: 5 * time.Second,
		OnMemberStateChange: onMember,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func hostKey(i int) string { return fmt.Sprintf("host-%02d.example", i) }

// TestSyncAllIsOnePipeline (issue #37): SyncAll exchanges for every live
// member of a group in one pipelined round trip, not one round trip per
// member, and each member's outcomes and state go through it: the keys
// that failed open in this process and, through Redis, in another.
func TestSyncAllIsOnePipeline(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	var tr trips
	c := newClient(t, srv.addr)
	c.AddHook(&tr)
	a := syncAllGroup(t, c, ns, fc, nil)
	b := syncAllGroup(t, newClient(t, srv.addr), ns, fc, nil)
	const n = 20
	for i := range n {
		mustSync(t, a.Get(hostKey(i))) // loads the scripts
		mustSync(t, b.Get(hostKey(i)))
	}
	fc.BlockUntil(2 * (n + 2)) // every loop made its first exchange and waits an hour
	for i := 0; i < n; i += 2 {
		if err := call(a.Get(hostKey(i)), errDown); err != nil {
			t.Fatal(err)
		}
	}
	tr.reset()
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s, p, m := tr.single.Load(), tr.pipelines.Load(), tr.piped.Load(); s != 0 || p != 1 || m != n+2 {
		t.Fatalf("SyncAll sent %d commands alone and %d pipelines of %d commands, want 0 and 1 of %d", s, p, m, n+2)
	}
	if err := b.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := breaker.Closed
		if i%2 == 0 {
			want = breaker.Open
		}
		for _, g := range []*KeyedBreakers{a, b} {
			if got := g.Get(hostKey(i)).State(); got != want {
				t.Fatalf("%s: %v, want %v", hostKey(i), got, want)
			}
		}
	}
	a.Close()
	if err := a.SyncAll(syncCtx(t)); err != ErrClosed {
		t.Fatalf("SyncAll after Close: %v, want ErrClosed", err)
	}
}

// TestSyncAllReloadsFlushedScripts: after Redis lost its script cache
// (SCRIPT FLUSH, a restart), the script is loaded again and the pipelined
// exchanges that met NOSCRIPT are sent again in a second pipeline.
func TestSyncAllReloadsFlushedScripts(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	a := syncAllGroup(t, newClient(t, srv.addr), namespace(t), fc, nil)
	for i := range 3 {
		mustSync(t, a.Get(hostKey(i)))
	}
	fc.BlockUntil(5)
	if err := call(a.Get(hostKey(1)), errDown); err != nil {
		t.Fatal(err)
	}
	if err := newClient(t, srv.addr).ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantState(t, a.Get(hostKey(1)), breaker.Open)
	for _, i := range []int{0, 2} {
		wantState(t, a.Get(hostKey(i)), breaker.Closed)
		if a.Get(hostKey(i)).Stats().Degraded {
			t.Fatalf("%s fell back", hostKey(i))
		}
	}
}

// TestSyncAllListenerPanic: a listener of one member panics in SyncAll:
// every other member still concludes its exchange (its state cached, its
// right to call Redis released), and the panic goes on once they have.
func TestSyncAllListenerPanic(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	a := syncAllGroup(t, newClient(t, srv.addr), namespace(t), fc, func(m Member, _, to breaker.State) {
		if m.Key == hostKey(0) && to == breaker.Open {
			panic("listener of " + m.Key)
		}
	})
	for i := range 4 {
		mustSync(t, a.Get(hostKey(i)))
	}
	fc.BlockUntil(6)
	for i := range 4 {
		if err := call(a.Get(hostKey(i)), errDown); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() {
			if v := recover(); v != "listener of "+hostKey(0) {
				t.Fatalf("SyncAll: panic %v, want the listener's", v)
			}
		}()
		_ = a.SyncAll(syncCtx(t))
	}()
	for i := range 4 {
		m := a.Get(hostKey(i))
		wantState(t, m, breaker.Open)
		mustSync(t, m) // not wedged
	}
}

// onlyScripter is a Scripter of the user's that does not pipeline.
type onlyScripter struct{ redis.Scripter }

// TestSyncAllWithoutPipelines: with a client that cannot pipeline, SyncAll
// syncs the members one after another, to the same effect.
func TestSyncAllWithoutPipelines(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	a := syncAllGroup(t, onlyScripter{newClient(t, srv.addr)}, namespace(t), fc, nil)
	for i := range 3 {
		mustSync(t, a.Get(hostKey(i)))
	}
	fc.BlockUntil(5)
	if err := call(a.Get(hostKey(2)), errDown); err != nil {
		t.Fatal(err)
	}
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantState(t, a.Get(hostKey(2)), breaker.Open)
	wantState(t, a.Get(hostKey(0)), breaker.Closed)
}

// TestSyncAllUnreachable: when Redis does not answer, every member of
// the pipeline falls back to local state, and SyncAll says why.
func TestSyncAllUnreachable(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	a := syncAllGroup(t, newClient(t, px.addr), namespace(t), fc, nil)
	for i := range 3 {
		mustSync(t, a.Get(hostKey(i)))
	}
	fc.BlockUntil(5)
	px.cut()
	if err := a.SyncAll(syncCtx(t)); err == nil {
		t.Fatal("SyncAll through a cut proxy succeeded")
	}
	for i := range 3 {
		if !a.Get(hostKey(i)).Stats().Degraded {
			t.Fatalf("%s did not fall back", hostKey(i))
		}
	}
	px.heal()
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if a.Get(hostKey(0)).Stats().Degraded {
		t.Fatal("did not re-join")
	}
}

// TestClusterSyncAll: on a three-node Redis Cluster, where the members'
// keys live on different slots and nodes, SyncAll's pipeline reaches each
// node, and two processes agree on every member's state.
func TestClusterSyncAll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := newRedisCluster(t)
	fc := clocktest.NewFake()
	ns := namespace(t)
	var tr trips
	ca := newClusterClient(t, rc.addrs)
	ca.AddHook(&tr)
	a := syncAllGroup(t, ca, ns, fc, nil)
	b := syncAllGroup(t, newClusterClient(t, rc.addrs), ns, fc, nil)
	const n = 30
	nodes := map[string]bool{}
	cc := newClusterClient(t, rc.addrs)
	for i := range n {
		mustSync(t, a.Get(hostKey(i)))
		mustSync(t, b.Get(hostKey(i)))
		_ = cc.ForEachShard(context.Background(), func(ctx context.Context, c *redis.Client) error {
			if ok, _ := c.Exists(ctx, a.Get(hostKey(i)).stateKey).Result(); ok == 1 {
				host, _, _ := net.SplitHostPort(c.Options().Addr)
				nodes[host+c.Options().Addr] = true
			}
			return nil
		})
	}
	if len(nodes) < 2 {
		t.Fatalf("the members' keys are on %d node(s), want several", len(nodes))
	}
	fc.BlockUntil(2 * (n + 2))
	for i := 0; i < n; i += 3 {
		if err := call(a.Get(hostKey(i)), errDown); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := breaker.Closed
		if i%3 == 0 {
			want = breaker.Open
		}
		for _, g := range []*KeyedBreakers{a, b} {
			if got := g.Get(hostKey(i)).State(); got != want {
				t.Fatalf("%s: %v, want %v", hostKey(i), got, want)
			}
		}
	}

	// Every node lost its script cache: SyncAll loads the script on
	// every node and resends the exchanges, none alone, none falling back.
	if err := cc.ForEachShard(context.Background(), func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	if err := call(a.Get(hostKey(1)), errDown); err != nil {
		t.Fatal(err)
	}
	tr.reset()
	if err := a.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := tr.single.Load(); s != 0 {
		t.Fatalf("SyncAll after SCRIPT FLUSH on every node sent %d script calls alone, want 0", s)
	}
	for i := range n {
		if a.Get(hostKey(i)).Stats().Degraded {
			t.Fatalf("%s fell back", hostKey(i))
		}
	}
	wantState(t, a.Get(hostKey(1)), breaker.Open)
}

// TestBatchRefreshOneGoroutinePerGroup (issue #37): with BatchRefresh a
// keyed group refreshes every live member from one goroutine, in one
// pipelined round trip per RefreshInterval, instead of a goroutine and a
// round trip per member; a failure brings the group's refresh forward,
// and a second process learns every member's state through Redis.
func TestBatchRefreshOneGoroutinePerGroup(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	var tr trips
	mk := func(c *redis.Client) *KeyedBreakers {
		k, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{
			Client: c, Name: "hosts", Namespace: ns, Clock: fc,
			Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
			RefreshInterval: testInterval, Timeout: 5 * time.Second, BatchRefresh: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		return k
	}
	c := newClient(t, srv.addr)
	c.AddHook(&tr)
	a, b := mk(c), mk(newClient(t, srv.addr))
	mustSync(t, a.Get(hostKey(0)))
	before := runtime.NumGoroutine()
	const n = 40
	for i := range n {
		a.Get(hostKey(i))
		b.Get(hostKey(i))
	}
	if d := runtime.NumGoroutine() - before; d > 4 {
		t.Fatalf("%d members of two groups started %d goroutines", 2*(n-1), d)
	}
	fc.BlockUntil(2)
	fc.Advance(testInterval / 10) // the new members brought the refresh forward
	waitFor(t, "every member's first exchange", func() bool {
		for i := range n {
			if a.Get(hostKey(i)).Stats().Syncs == 0 || b.Get(hostKey(i)).Stats().Syncs == 0 {
				return false
			}
		}
		return true
	})

	fc.BlockUntil(2) // both groups' loops wait for their next refresh
	tr.reset()
	fc.Advance(testInterval)
	waitFor(t, "the refresh", func() bool { return tr.piped.Load() >= n+2 })
	fc.BlockUntil(2)
	if s, p, m := tr.single.Load(), tr.pipelines.Load(), tr.piped.Load(); s != 0 || p != 1 || m != n+2 {
		t.Fatalf("a refresh sent %d script calls alone and %d pipelines of %d, want 0 and 1 of %d", s, p, m, n+2)
	}

	// A failure brings a's refresh forward: the trip reaches Redis, and
	// b's next refresh brings it back.
	syncs := a.Get(hostKey(7)).Stats().Syncs
	if err := call(a.Get(hostKey(7)), errDown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failure to reach a's loop", func() bool { return len(fc.Deadlines()) == 2 && fc.Deadlines()[0] < testInterval })
	fc.Advance(testInterval / 10)
	waitFor(t, "the early refresh", func() bool { return a.Get(hostKey(7)).Stats().Syncs > syncs })
	wantState(t, a.Get(hostKey(7)), breaker.Open)
	fc.BlockUntil(2)
	fc.Advance(testInterval)
	waitFor(t, "b's refresh to open its member", func() bool { return b.Get(hostKey(7)).State() == breaker.Open })
	for i := range n {
		if i != 7 && b.Get(hostKey(i)).State() != breaker.Closed {
			t.Fatalf("%s: %v", hostKey(i), b.Get(hostKey(i)).State())
		}
	}
}

// batchGroup makes a BatchRefresh group of one name on client.
func batchGroup(t *testing.T, client redis.Scripter, ns string, fc *clocktest.Fake, logger *slog.Logger, onMember func(Member, breaker.State, breaker.State)) *KeyedBreakers {
	t.Helper()
	k, err := NewKeyedBreakers(keyed.Config{}, BreakerConfig{
		Client: client, Name: "hosts", Namespace: ns, Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: 5 * time.Second, BatchRefresh: true,
		Logger: logger, OnMemberStateChange: onMember,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// TestBatchRefreshListenerPanicAndClose: on the group's goroutine a
// member listener that panics is logged and the refreshes go on, and one
// that closes the group does not wait for itself: the goroutine ends.
func TestBatchRefreshListenerPanicAndClose(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	var logs lockedBuffer
	var k *KeyedBreakers
	var closing atomic.Bool
	k = batchGroup(t, newClient(t, srv.addr), namespace(t), fc, slog.New(slog.NewTextHandler(&logs, nil)),
		func(m Member, _, to breaker.State) {
			switch {
			case m.Key == hostKey(0) && to == breaker.Open:
				panic("listener of " + m.Key)
			case m.Key == hostKey(1) && to == breaker.Open:
				closing.Store(true)
				k.Close()
			}
		})
	fc.BlockUntil(1)
	m0, m1 := k.Get(hostKey(0)), k.Get(hostKey(1))
	mustSync(t, m0)
	mustSync(t, m1)
	if err := call(m0, errDown); err != nil {
		t.Fatal(err)
	}
	fc.BlockUntil(1)
	fc.Advance(testInterval)
	waitFor(t, "the panic to be logged", func() bool { return strings.Contains(logs.String(), "listener of "+hostKey(0)) })
	wantState(t, m0, breaker.Open)
	if err := call(m1, errDown); err != nil {
		t.Fatal(err)
	}
	fc.BlockUntil(1)
	fc.Advance(testInterval)
	waitFor(t, "the listener to close the group", func() bool { return closing.Load() })
	<-k.loop.stopped // the group's goroutine ended
}

// TestClusterBatchRefresh: on a three-node Redis Cluster a BatchRefresh
// group's refresh reaches the members on every node (go-redis splits the
// pipeline per node), and a second group learns their states.
func TestClusterBatchRefresh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := newRedisCluster(t)
	fc := clocktest.NewFake()
	ns := namespace(t)
	a := batchGroup(t, newClusterClient(t, rc.addrs), ns, fc, nil, nil)
	b := batchGroup(t, newClusterClient(t, rc.addrs), ns, fc, nil, nil)
	const n = 30
	for i := range n {
		a.Get(hostKey(i))
		b.Get(hostKey(i))
	}
	for range 2 {
		fc.BlockUntil(2)
		fc.Advance(testInterval)
	}
	waitFor(t, "every member's first exchange", func() bool {
		for i := range n {
			if a.Get(hostKey(i)).Stats().Syncs == 0 || b.Get(hostKey(i)).Stats().Syncs == 0 {
				return false
			}
		}
		return true
	})
	for i := 0; i < n; i += 3 {
		if err := call(a.Get(hostKey(i)), errDown); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // a's refresh takes the trips to Redis, b's brings them back
		fc.BlockUntil(2)
		fc.Advance(testInterval)
	}
	waitFor(t, "b to see every trip", func() bool {
		for i := range n {
			want := breaker.Closed
			if i%3 == 0 {
				want = breaker.Open
			}
			if a.Get(hostKey(i)).State() != want || b.Get(hostKey(i)).State() != want {
				return false
			}
		}
		return true
	})
}

// TestStoreBatchRefresh: a policy file's per-host shared breakers take
// Store.BatchRefresh; without it, or with a client that does not
// pipeline, each member has its own loop.
func TestStoreBatchRefresh(t *testing.T) {
	srv := sharedRedis(t)
	for _, x := range []struct {
		client redis.Scripter
		batch  bool
		want   bool
	}{{newClient(t, srv.addr), true, true}, {newClient(t, srv.addr), false, false}, {onlyScripter{newClient(t, srv.addr)}, true, false}} {
		st := &Store{Client: x.client, Namespace: namespace(t), BatchRefresh: x.batch}
		g, closeGroup, err := st.SharedBreakerGroup("hosts", breaker.Config{}, keyed.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.(*KeyedBreakers).loop != nil; got != x.want {
			t.Errorf("BatchRefresh %v, client %T: the group's loop %v, want %v", x.batch, x.client, got, x.want)
		}
		closeGroup()
	}
}

// TestKeyedBudgetsSyncAllIsOnePipeline: KeyedBudgets.SyncAll flushes
// every member's deposits and takes every member's lease in one
// pipelined round trip; with BatchRefresh the group's one goroutine does
// so every RefreshInterval.
func TestKeyedBudgetsSyncAllIsOnePipeline(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	var tr trips
	c := newClient(t, srv.addr)
	c.AddHook(&tr)
	for _, batch := range []bool{false, true} {
		name := fmt.Sprintf("hosts-%v", batch)
		k, err := NewKeyedBudgets(keyed.Config{}, BudgetConfig{
			Client: c, Name: name, Namespace: ns, Clock: fc,
			Ratio:           budget.RatioConfig{MaxTokens: 10, StartEmpty: true, Refill: 1, RetryCost: 1},
			RefreshInterval: testInterval, Timeout: 5 * time.Second, BatchRefresh: batch,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		const n = 10
		for i := range n {
			if err := k.Get(hostKey(i)).Sync(syncCtx(t)); err != nil { // loads the script
				t.Fatal(err)
			}
		}
		loops := n + 2
		if batch {
			loops = 1
		}
		fc.BlockUntil(loops)
		for i := range n {
			for range i + 1 {
				k.Get(hostKey(i)).Record(false, nil) // i+1 tokens for host i
			}
		}
		tr.reset()
		if batch {
			fc.Advance(testInterval)
			waitFor(t, "the group's refresh", func() bool { return tr.piped.Load() >= n+2 })
			fc.BlockUntil(1)
		} else if err := k.SyncAll(syncCtx(t)); err != nil {
			t.Fatal(err)
		}
		if s, p, m := tr.single.Load(), tr.pipelines.Load(), tr.piped.Load(); s != 0 || p != 1 || m != n+2 {
			t.Fatalf("BatchRefresh %v: %d script calls alone and %d pipelines of %d, want 0 and 1 of %d", batch, s, p, m, n+2)
		}
		for i := range n {
			m := k.Get(hostKey(i))
			if got := bucketTokens(t, srv.addr, ns, keyTag(name, hostKey(i), false)) + m.Lease(); got != float64(i+1) {
				t.Fatalf("BatchRefresh %v: %s: bucket and lease hold %v tokens, want %d", batch, hostKey(i), got, i+1)
			}
		}
		k.Close()
		if err := k.SyncAll(syncCtx(t)); err != ErrClosed {
			t.Fatalf("SyncAll after Close: %v", err)
		}
	}
}

// TestBatchRefreshBudgetDegradedCloses: with BatchRefresh, an
// OnMemberDegraded that closes the group when Redis is lost, on the
// group's goroutine, does not wait on a member the refresh still holds:
// every member's exchange is over before any OnDegraded runs.
func TestBatchRefreshBudgetDegradedCloses(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	var k *KeyedBudgets
	closed := make(chan struct{})
	var once atomic.Bool
	k, err := NewKeyedBudgets(keyed.Config{}, BudgetConfig{
		Client: newClient(t, px.addr), Name: "hosts", Namespace: namespace(t), Clock: fc,
		Ratio:           budget.RatioConfig{MaxTokens: 10},
		RefreshInterval: testInterval, Timeout: time.Second, BatchRefresh: true,
		OnMemberDegraded: func(m Member, degraded bool, _ error) {
			if degraded && once.CompareAndSwap(false, true) {
				k.Close()
				close(closed)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	for i := range 5 {
		k.Get(hostKey(i)).Record(false, nil)
	}
	fc.BlockUntil(1)
	fc.Advance(testInterval)
	waitFor(t, "the first refresh", func() bool { return k.Get(hostKey(4)).Stats().Link.Syncs > 0 })
	fc.BlockUntil(1)
	px.cut()
	fc.Advance(testInterval)
	<-closed // the group's goroutine closed the group without waiting for itself
	<-k.loop.stopped
}
