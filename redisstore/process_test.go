package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
)

// The environment of a helper process started by TestThreeProcesses.
const (
	helperEnv   = "REDISSTORE_TEST_HELPER"
	helperAddr  = "REDISSTORE_TEST_ADDR"
	helperNS    = "REDISSTORE_TEST_NAMESPACE"
	helperMode  = "REDISSTORE_TEST_MODE"  // "cluster": helperAddr is a comma-separated list of nodes
	helperEarly = "REDISSTORE_TEST_EARLY" // failing calls to make at once, before the first exchange
	procRefresh = 50 * time.Millisecond
	procOpen    = 500 * time.Millisecond
	// procTimeout bounds the helpers' Redis calls: far above a loopback
	// round trip on a loaded machine (the default, RefreshInterval here,
	// made a helper's Sync fail under load), far below the tests' waits.
	procTimeout = time.Second
)

// TestHelperProcess is not a test: TestThreeProcesses runs the test binary
// again with helperEnv set, and this function then serves one Breaker on
// the real clock, driven by commands on stdin, one reply line per command
// on stdout (prefixed with "@ " to stand apart from the test runner's
// output).
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process for TestThreeProcesses")
	}
	var rdb redis.Scripter
	if os.Getenv(helperMode) == "cluster" {
		rdb = newClusterClient(t, strings.Split(os.Getenv(helperAddr), ","))
	} else {
		rdb = newClient(t, os.Getenv(helperAddr))
	}
	b, err := NewBreaker(BreakerConfig{
		Client: rdb, Name: "orders", Namespace: os.Getenv(helperNS),
		Breaker:         breaker.Config{ConsecutiveFailures: 5, OpenTimeout: procOpen, OpenJitter: -1},
		RefreshInterval: procRefresh,
		Timeout:         procTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	reply := func(format string, args ...any) { fmt.Printf("@ "+format+"\n", args...) }
	if n, _ := strconv.Atoi(os.Getenv(helperEarly)); n > 0 {
		// A process restarting during an incident: its first calls fail,
		// before it has exchanged with Redis.
		var dones []func(error)
		for range n {
			if done, err := b.Allow(); err == nil {
				dones = append(dones, done)
			}
		}
		for _, done := range dones {
			done(errDown)
		}
		reply("ready %v", b.State())
	} else {
		if err := b.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		reply("ready")
	}
	var pending func(error)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "fail":
			n, _ := strconv.Atoi(arg)
			for range n {
				if done, err := b.Allow(); err == nil {
					done(errDown)
				}
			}
			reply("ok")
		case "ok":
			// n calls to a healthy downstream; the reply is how many were refused
			n, _ := strconv.Atoi(arg)
			refused := 0
			for range n {
				done, err := b.Allow()
				if err != nil {
					refused++
					continue
				}
				done(nil)
			}
			reply("%d", refused)
		case "sync":
			if err := b.Sync(context.Background()); err != nil {
				reply("error %v", err)
				continue
			}
			reply("%v", b.State())
		case "state":
			reply("%v", b.State())
		case "degraded":
			reply("%v", b.Stats().Degraded)
		case "probe":
			done, err := b.Allow()
			if err != nil {
				reply("refused %v", err)
				continue
			}
			pending = done
			reply("admitted")
		case "finish":
			if pending != nil {
				pending(nil)
			}
			reply("%v", b.State())
		case "quit":
			return
		}
	}
}

// helper is one process started by TestThreeProcesses.
type helper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHelper(t *testing.T, mode, addr, ns string, early int) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperAddr+"="+addr, helperNS+"="+ns,
		helperMode+"="+mode, helperEarly+"="+strconv.Itoa(early))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	want := "ready"
	if early >= 5 {
		want = "ready open" // the local breaker opened after 5 failures
	}
	if got := h.read(t); got != want {
		t.Fatalf("helper said %q, want %q", got, want)
	}
	return h
}

// send writes one command and returns the reply line, without its prefix.
// It does not stop the test, so other goroutines may call it.
func (h *helper) send(cmd string) (string, error) {
	if _, err := io.WriteString(h.in, cmd+"\n"); err != nil {
		return "", err
	}
	return h.next()
}

func (h *helper) next() (string, error) {
	for h.out.Scan() {
		if line, ok := strings.CutPrefix(h.out.Text(), "@ "); ok {
			return line, nil
		}
	}
	return "", fmt.Errorf("helper process ended (%v)", h.out.Err())
}

func (h *helper) read(t *testing.T) string {
	t.Helper()
	line, err := h.next()
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func (h *helper) do(t *testing.T, cmd string) string {
	t.Helper()
	line, err := h.send(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestThreeProcesses: three operating-system processes share one breaker
// through Redis, a single redis-server and a three-node Redis Cluster:
// failures seen by one open it for all, and one probe runs in the whole
// fleet in the half-open state. Process 0 starts during an incident: its
// 10 calls fail at once before its first exchange with Redis (issue #26
// item 0), and they open the breaker for every process.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	t.Run("single", func(t *testing.T) {
		srv := ownRedis(t)
		testThreeProcesses(t, "single", srv.addr)
		testThreeProcessesStopped(t, srv)
	})
	t.Run("cluster", func(t *testing.T) {
		rc := newRedisCluster(t)
		testThreeProcesses(t, "cluster", strings.Join(rc.addrs, ","))
	})
}

func testThreeProcesses(t *testing.T, mode, addr string) {
	ns := namespace(t)
	hs := make([]*helper, 3)
	hs[0] = startHelper(t, mode, addr, ns, 10)
	for i := 1; i < len(hs); i++ {
		hs[i] = startHelper(t, mode, addr, ns, 0)
	}
	if got := hs[0].do(t, "sync"); got != "open" {
		t.Fatalf("process 0 after 10 failures and an exchange: %s, want open", got)
	}
	opened := time.Now()
	for i, h := range hs[1:] {
		waitFor(t, "process "+strconv.Itoa(i+1)+" to see the breaker open", func() bool { return h.do(t, "state") == "open" })
	}
	t.Logf("processes 1 and 2 saw the breaker open %v after process 0 opened it (RefreshInterval %v)",
		time.Since(opened).Round(time.Millisecond), procRefresh)

	// Redis loses the state (FLUSHALL on every node) while the breaker is
	// open: the processes restore it at their next exchange, and none
	// turns closed.
	ctx := context.Background()
	var rdb redis.Cmdable
	nodes := strings.Split(addr, ",")
	if mode == "cluster" {
		rdb = newClusterClient(t, nodes)
	} else {
		rdb = newClient(t, addr)
	}
	for _, n := range nodes {
		if err := newClient(t, n).FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flushed := time.Now()
	stateKey := ns + ":{orders}:state"
	waitFor(t, "the open state to be restored in Redis", func() bool {
		st, _ := rdb.HGet(ctx, stateKey, "st").Result()
		return st == "1" || st == "2"
	})
	t.Logf("state restored %v after FLUSHALL (RefreshInterval %v)", time.Since(flushed).Round(time.Millisecond), procRefresh)
	for i, h := range hs {
		if got := h.do(t, "sync"); got == "closed" {
			t.Fatalf("process %d after FLUSHALL: %s, want the breaker still open", i, got)
		}
	}

	for i, h := range hs {
		waitFor(t, "process "+strconv.Itoa(i)+" to see the open period end", func() bool { return h.do(t, "state") == "half-open" })
	}
	replies := make([]string, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			r, err := h.send("probe")
			if err != nil {
				r = err.Error()
			}
			replies[i] = r
		})
	}
	wg.Wait()
	winner := -1
	for i, r := range replies {
		if r == "admitted" {
			if winner >= 0 {
				t.Fatalf("two processes probe at once: %q", replies)
			}
			winner = i
		} else if r != "refused "+breaker.ErrTooManyProbes.Error() {
			t.Fatalf("process %d: %q, want admitted or ErrTooManyProbes", i, r)
		}
	}
	if winner < 0 {
		t.Fatalf("no process was admitted to probe: %q", replies)
	}
	if got := hs[winner].do(t, "finish"); got != "closed" {
		t.Fatalf("after a successful probe the prober sees %s", got)
	}
	for i, h := range hs {
		waitFor(t, "process "+strconv.Itoa(i)+" to see the breaker closed", func() bool { return h.do(t, "state") == "closed" })
		_, _ = h.in.Write([]byte("quit\n"))
	}
}

// testThreeProcessesStopped: Redis stops answering (SIGSTOP) while three
// processes run; all fall back, process 0's failures open its local
// breaker, and when Redis answers again that trip opens the shared breaker
// for all three.
func testThreeProcessesStopped(t *testing.T, srv *redisServer) {
	ns := namespace(t)
	hs := make([]*helper, 3)
	for i := range hs {
		hs[i] = startHelper(t, "single", srv.addr, ns, 0)
	}
	srv.pause()
	for i, h := range hs {
		waitFor(t, "process "+strconv.Itoa(i)+" to fall back", func() bool { return h.do(t, "degraded") == "true" })
	}
	if got := hs[0].do(t, "fail 5"); got != "ok" {
		t.Fatal(got)
	}
	if got := hs[0].do(t, "state"); got != "open" {
		t.Fatalf("process 0's local breaker after 5 failures: %s", got)
	}
	srv.resume()
	resumed := time.Now()
	for i, h := range hs {
		waitFor(t, "process "+strconv.Itoa(i)+" to see the breaker open", func() bool { return h.do(t, "state") == "open" })
	}
	t.Logf("after SIGCONT every process saw process 0's trip within %v (RefreshInterval %v)",
		time.Since(resumed).Round(time.Millisecond), procRefresh)
	for _, h := range hs {
		_, _ = h.in.Write([]byte("quit\n"))
	}
}
