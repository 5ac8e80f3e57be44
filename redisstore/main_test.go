package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain stops the shared redis-server after the tests, then checks that
// no goroutine was left running.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // go-redis reports refused dials of the outage tests
	code := m.Run()
	stopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const skipNoRedis = "redis-server is not on PATH: the Redis-backed tests need it (apt-get install redis-server; .ci/run installs it)"

// skipNoServer skips the test for a missing redis-server, or fails it
// under CI=true, where every test must run.
func skipNoServer(tb testing.TB) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(skipNoRedis + " (CI=true: failing instead of skipping)")
	}
	tb.Skip(skipNoRedis)
}

// redisServer is a redis-server process on a loopback port, without
// persistence, owned by a test.
type redisServer struct {
	bin  string
	port int
	dir  string
	addr string
	args []string // extra arguments (cluster mode)

	mu  sync.Mutex
	cmd *exec.Cmd
}

// newRedisServer starts a redis-server on a free loopback port.
func newRedisServer(tb testing.TB) *redisServer {
	tb.Helper()
	return newRedisServerArgs(tb)
}

// newRedisServerArgs starts a redis-server with extra arguments on a free
// loopback port.
func newRedisServerArgs(tb testing.TB, args ...string) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipNoServer(tb)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "redisstore-test-")
	if err != nil {
		tb.Fatal(err)
	}
	r := &redisServer{bin: bin, port: port, dir: dir, addr: "127.0.0.1:" + strconv.Itoa(port), args: args}
	if err := r.start(); err != nil {
		os.RemoveAll(dir)
		tb.Fatal(err)
	}
	return r
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on r.port and waits (at most 10s) until it
// answers PING.
func (r *redisServer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	args := append([]string{
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"),
		"--daemonize", "no"}, r.args...)
	cmd := exec.Command(r.bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(r.addr) == nil {
			r.cmd = cmd
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s did not answer PING within 10s; its log:\n%s", r.addr, log)
		}
		time.Sleep(10 * time.Millisecond) // polling a process start-up, bounded above
	}
}

// ping sends one PING over a fresh connection.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("unexpected PING reply " + strconv.Quote(line))
	}
	return nil
}

// kill stops the server process at once (SIGKILL) and waits for it.
func (r *redisServer) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies too
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// pause stops the process (SIGSTOP): connections stay open and calls hang.
func (r *redisServer) pause() { r.signal(syscall.SIGSTOP) }

// resume continues a paused process.
func (r *redisServer) resume() { r.signal(syscall.SIGCONT) }

func (r *redisServer) signal(s os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(s)
	}
}

// close kills the server and removes its directory.
func (r *redisServer) close() {
	r.kill()
	os.RemoveAll(r.dir)
}

// ownRedis starts a server for one test and stops it when the test ends.
func ownRedis(tb testing.TB) *redisServer {
	tb.Helper()
	r := newRedisServer(tb)
	tb.Cleanup(r.close)
	return r
}

var shared struct {
	once sync.Once
	srv  *redisServer
	skip bool
}

// sharedRedis returns the server shared by the tests that do not stop it,
// started on first use; it skips the test when redis-server is missing.
func sharedRedis(tb testing.TB) *redisServer {
	tb.Helper()
	shared.once.Do(func() {
		if _, err := exec.LookPath("redis-server"); err != nil {
			shared.skip = true
			return
		}
		shared.srv = newRedisServer(tb)
	})
	if shared.skip {
		skipNoServer(tb)
	}
	if shared.srv == nil {
		tb.Fatal("the shared redis-server could not start")
	}
	return shared.srv
}

func stopShared() {
	if shared.srv != nil {
		shared.srv.close()
	}
}

// newClient returns a client of addr, with its own connections, closed
// when the test ends.
func newClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		PoolSize:              4,
	})
	tb.Cleanup(func() { c.Close() })
	return c
}

var nsSeq atomic.Uint64

// namespace returns a namespace no other test uses.
func namespace(tb testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "-", "{", "", "}", "").Replace(tb.Name())
	return fmt.Sprintf("test-%s-%d-%d", name, os.Getpid(), nsSeq.Add(1))
}

// waitFor polls cond until it holds or 10 seconds of wall time pass. It
// waits on work done by other goroutines (background exchanges with a
// real Redis), never on a duration the code under test chooses.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after 10s waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func syncCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
