package redisstore

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// proxy is a loopback TCP proxy in front of a redis-server. It can drop
// the next reply Redis sends (and the connection it came on), as a network
// that loses a reply after Redis ran the command does, and it can hold
// every request until released.
type proxy struct {
	ln     net.Listener
	target string
	addr   string

	drops   atomic.Int32 // replies still to drop
	dropped atomic.Int32 // replies dropped so far
	severed atomic.Bool  // partitioned: every connection is closed at once (see cut)

	gateMu sync.Mutex
	gate   chan struct{} // non-nil: requests wait until it is closed

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, addr: ln.Addr().String()}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.severed.Load() {
			c.Close()
			continue
		}
		r, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.severed.Load() { // cut while dialling
			p.mu.Unlock()
			c.Close()
			r.Close()
			continue
		}
		p.conns = append(p.conns, c, r)
		p.mu.Unlock()
		p.wg.Go(func() { p.requests(c, r) })
		p.wg.Go(func() { p.replies(r, c) })
	}
}

// requests copies client → Redis, waiting at the gate.
func (p *proxy) requests(c, r net.Conn) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.gateMu.Lock()
			g := p.gate
			p.gateMu.Unlock()
			if g != nil {
				<-g
			}
			if _, werr := r.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// replies copies Redis → client, dropping a reply when asked to.
func (p *proxy) replies(r, c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if p.drops.Load() > 0 && p.drops.Add(-1) >= 0 {
				p.dropped.Add(1)
				r.Close() // Redis ran the command; its reply is lost with the connection
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut partitions the client from Redis: the open connections are closed
// and new ones are closed as soon as they are accepted, until heal.
func (p *proxy) cut() {
	p.severed.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// heal ends a partition made by cut.
func (p *proxy) heal() { p.severed.Store(false) }

// dropNext makes the proxy drop the next n replies.
func (p *proxy) dropNext(n int32) { p.drops.Store(n) }

// hold makes requests wait until release.
func (p *proxy) hold() {
	p.gateMu.Lock()
	p.gate = make(chan struct{})
	p.gateMu.Unlock()
}

func (p *proxy) release() {
	p.gateMu.Lock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.gateMu.Unlock()
}

func (p *proxy) close() {
	p.release()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// redisCluster is a Redis Cluster of three masters on loopback ports, no
// replicas, owned by a test.
type redisCluster struct {
	nodes []*redisServer
	addrs []string
}

// newRedisCluster starts three cluster-enabled redis-servers and joins them
// with redis-cli --cluster create; it fails the test unless the cluster is
// ready within 30s.
func newRedisCluster(tb testing.TB) *redisCluster {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		skipNoServer(tb)
	}
	rc := &redisCluster{}
	for range 3 {
		bus, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		n := newRedisServerArgs(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000")
		tb.Cleanup(n.close)
		rc.nodes = append(rc.nodes, n)
		rc.addrs = append(rc.addrs, n.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, rc.addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range rc.addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				tb.Fatalf("cluster node %s not ready: %v %q", a, err, info)
			}
			time.Sleep(20 * time.Millisecond) // polling the cluster's start-up, bounded above
		}
		c.Close()
	}
	return rc
}

// newClusterClient returns a cluster client of addrs, closed when the test
// ends.
func newClusterClient(tb testing.TB, addrs []string) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		PoolSize:              4,
	})
	tb.Cleanup(func() { c.Close() })
	return c
}

// loadScripts loads every script into addr's script cache, so that a
// dropped reply is that of a script run, not of EVALSHA's NOSCRIPT.
func loadScripts(tb testing.TB, c redis.Scripter) {
	tb.Helper()
	for _, s := range []*redis.Script{syncScript, claimScript, reportScript, budgetScript} {
		if err := s.Load(context.Background(), c).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

var errTimedOut = errors.New("timed out")

// within runs fn and reports errTimedOut if it has not returned after d
// (wall time): a check for deadlocks, not a latency assertion.
func within(d time.Duration, fn func()) error {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return errTimedOut
	}
}
