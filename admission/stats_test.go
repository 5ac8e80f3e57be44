package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestStatsQueueWaitCountsQueuedRequests (issue 38 item 4, the queue
// delay metric): every request that leaves the queue — given a slot or
// shed from it — adds its wait to Stats; one admitted at once adds
// nothing.
func TestStatsQueueWaitCountsQueuedRequests(t *testing.T) {
	f := clocktest.NewFake()
	l, hold := oneSlot(t, f, 0)
	out := make(chan result, 2)
	enqueue(t, l, context.Background(), "A", out) // t=0
	f.Advance(30 * time.Millisecond)
	enqueue(t, l, context.Background(), "B", out) // t=30ms
	f.Advance(10 * time.Millisecond)
	hold.Release() // t=40ms: A served after 40ms
	a := expect(t, out, "A", nil)
	f.Advance(90 * time.Millisecond) // t=130ms: B waited its 100ms interval
	expect(t, out, "B", admission.ErrQueueTimeout)
	a.p.Release()
	s := l.Stats()
	if s.QueueWaits != 2 || s.QueueWaitTotal != 140*time.Millisecond {
		t.Fatalf("QueueWaits %d, QueueWaitTotal %v; want 2 and 140ms (40ms + 100ms)", s.QueueWaits, s.QueueWaitTotal)
	}
}

// TestQueueFIFOServesOldestWhileQueueStands: Config.FIFO turns adaptive
// LIFO off (the policy file's lifo: false); the CoDel target still
// applies.
func TestQueueFIFOServesOldestWhileQueueStands(t *testing.T) {
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1, FIFO: true})
	hold := mustAcquire(t, l)
	out := make(chan result, 4)
	enqueue(t, l, context.Background(), "A", out) // t=0: 100ms
	f.Advance(99 * time.Millisecond)
	enqueue(t, l, context.Background(), "B", out) // t=99ms: no queue stands yet: 100ms
	f.Advance(2 * time.Millisecond)               // t=101ms: a queue stands
	expect(t, out, "A", admission.ErrQueueTimeout)
	enqueue(t, l, context.Background(), "C", out) // a queue stands: 5ms
	hold.Release()                                // FIFO: B, although a queue stands
	b := expect(t, out, "B", nil)
	f.Advance(5 * time.Millisecond)
	expect(t, out, "C", admission.ErrQueueTimeout)
	b.p.Release()
}
