package promretry_test

import (
	"bytes"
	"context"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
)

// busyAdmission returns a Limiter of limit 1 on f with one request in
// flight, one that waited 40ms in the queue and was shed (queue timeout
// after its interval of 40ms), and one shed for a full queue (length 1).
func busyAdmission(t *testing.T, f *clocktest.Fake) (*admission.Limiter, admission.Permit) {
	t.Helper()
	l, err := admission.New(admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1,
		QueueLength: 1, QueueTarget: 5 * time.Millisecond, QueueInterval: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := l.Acquire(context.Background()); done <- err }()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	if _, err := l.Acquire(context.Background()); err != admission.ErrQueueFull {
		t.Fatalf("second waiter: %v, want ErrQueueFull", err)
	}
	f.Advance(40 * time.Millisecond)
	if err := <-done; err != admission.ErrQueueTimeout {
		t.Fatalf("waiter: %v, want ErrQueueTimeout", err)
	}
	return l, p
}

// TestWatchAdmissionExportsLimiterState (issue 38 item 4): WatchAdmission
// exports a Limiter's limit, in flight, queue length, queue delay and
// sheds by reason, read at scrape time; every reason is exported, at 0
// too; unwatch removes the series; the exposition passes promtool check
// metrics.
func TestWatchAdmissionExportsLimiterState(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	f := clocktest.NewFake()
	l, p := busyAdmission(t, f)
	defer p.Release()
	unwatch := c.WatchAdmission("api", l)
	want := `
# HELP stormguard_admission_in_flight Requests an admission limiter has admitted and not yet released, read at scrape time.
# TYPE stormguard_admission_in_flight gauge
stormguard_admission_in_flight{limiter="api"} 1
# HELP stormguard_admission_limit The concurrency limit an admission limiter enforces now (the algorithm's, or the probe's while it measures the no-load latency), read at scrape time.
# TYPE stormguard_admission_limit gauge
stormguard_admission_limit{limiter="api"} 1
# HELP stormguard_admission_queue_delay_seconds Time requests waited in an admission limiter's queue before they were given a slot or shed from it, in seconds (requests admitted at once are not counted).
# TYPE stormguard_admission_queue_delay_seconds summary
stormguard_admission_queue_delay_seconds_sum{limiter="api"} 0.04
stormguard_admission_queue_delay_seconds_count{limiter="api"} 1
# HELP stormguard_admission_queue_length Requests waiting in an admission limiter's queue, read at scrape time.
# TYPE stormguard_admission_queue_length gauge
stormguard_admission_queue_length{limiter="api"} 0
# HELP stormguard_admission_shed_total Requests an admission limiter shed, by reason: limit (no queue), queue_full, queue_timeout (waited longer than CoDel allows), caller_gone (the caller gave up while it waited).
# TYPE stormguard_admission_shed_total counter
stormguard_admission_shed_total{limiter="api",reason="caller_gone"} 0
stormguard_admission_shed_total{limiter="api",reason="limit"} 0
stormguard_admission_shed_total{limiter="api",reason="queue_full"} 1
stormguard_admission_shed_total{limiter="api",reason="queue_timeout"} 1
`
	names := []string{"stormguard_admission_in_flight", "stormguard_admission_limit", "stormguard_admission_queue_delay_seconds",
		"stormguard_admission_queue_length", "stormguard_admission_shed_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	promtoolCheck(t, reg, "stormguard_admission_")
	unwatch()
	unwatch()
	if m := find(t, reg, "stormguard_admission_limit", "limiter", "api"); m != nil {
		t.Fatal("exported after unwatch")
	}
	var nilC *promretry.Collector
	nilC.WatchAdmission("x", l)()
	c.WatchAdmission("x", nil)()
}

// TestWatchAdmissionSameNameReplaces: a second Limiter watched under the
// same name (a hot reload built a new one) replaces the first; the first
// one's unwatch then leaves the second alone.
func TestWatchAdmissionSameNameReplaces(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	a, _ := admission.New(admission.Config{Limit: admission.Fixed{N: 3}})
	b, _ := admission.New(admission.Config{Limit: admission.Fixed{N: 7}})
	unA := c.WatchAdmission("api", a)
	c.WatchAdmission("api", b)
	unA()
	if v := value(t, reg, "stormguard_admission_limit", "limiter", "api"); v != 7 {
		t.Fatalf("limit %v, want 7 (the second Limiter)", v)
	}
}

// promtoolCheck lints the families of g named with prefix with promtool
// check metrics (skipped without promtool, except under CI=true).
func promtoolCheck(t *testing.T, g prometheus.Gatherer, prefix string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		promtoolCheckMetrics(t, g) // skips or fails as CI says
		return
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		n++
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Fatalf("no family named %s*", prefix)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestWatchAdmissionInvalidUTF8Name: a limiter name that is not valid
// UTF-8 is exported with the invalid bytes replaced, as operation names
// are, instead of failing every scrape.
func TestWatchAdmissionInvalidUTF8Name(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	l, _ := admission.New(admission.Config{Limit: admission.Fixed{N: 3}})
	defer c.WatchAdmission("api\xff", l)()
	if v := value(t, reg, "stormguard_admission_limit", "limiter", "api\uFFFD"); v != 3 {
		t.Fatalf("limit %v, want 3", v)
	}
}
