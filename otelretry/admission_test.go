package otelretry_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/otelretry"
	"go.opentelemetry.io/otel/attribute"
)

// TestWatchAdmissionReportsLimiterState (issue 38 item 4): WatchAdmission
// reports a Limiter's limit, in flight, queue length, queue delay (total
// and count) and sheds by reason, read at collection; unwatch stops it.
func TestWatchAdmissionReportsLimiterState(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	f := clocktest.NewFake()
	l, err := admission.New(admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1,
		QueueLength: 1, QueueInterval: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
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

	unwatch := h.obs.WatchAdmission("api", l)
	api := attribute.String("limiter", "api")
	reason := func(r string) attribute.KeyValue { return attribute.String("reason", r) }
	for _, c := range []struct {
		name string
		kv   []attribute.KeyValue
		want float64
	}{
		{"stormguard.admission.limit", nil, 1},
		{"stormguard.admission.in_flight", nil, 1},
		{"stormguard.admission.queue.length", nil, 0},
		{"stormguard.admission.queue.delay", nil, 0.04},
		{"stormguard.admission.queue.waits", nil, 1},
		{"stormguard.admission.shed", []attribute.KeyValue{reason("limit")}, 0},
		{"stormguard.admission.shed", []attribute.KeyValue{reason("queue_full")}, 1},
		{"stormguard.admission.shed", []attribute.KeyValue{reason("queue_timeout")}, 1},
		{"stormguard.admission.shed", []attribute.KeyValue{reason("caller_gone")}, 0},
	} {
		if v := h.value(t, c.name, append([]attribute.KeyValue{api}, c.kv...)...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.kv, v, c.want)
		}
	}
	unwatch()
	unwatch()
	if _, ok := h.point(t, "stormguard.admission.limit", api); ok {
		t.Fatal("reported after unwatch")
	}
	var nilO *otelretry.Observer
	nilO.WatchAdmission("x", l)()
	h.obs.WatchAdmission("x", nil)()
}
