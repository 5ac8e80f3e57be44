package queue_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// TestCollectorOutage runs a collector that is down for 30s and then
// recovers, on the fake clock, with records offered throughout. Memory
// stays within the capacity, every record is either delivered exactly once
// or counted as dropped, and after recovery the newest records are the
// ones delivered.
//
// The test moves in lockstep with the single worker: records are offered
// only while it waits on the clock (between retries or in a pause), so
// every count is exact.
func TestCollectorOutage(t *testing.T) {
	const (
		capacity = 100
		batch    = 10
		outage   = 30 * time.Second
	)
	for _, tc := range []struct {
		name        string
		maxAttempts int
		// heldBatch: with unlimited attempts the first batch stays in its
		// delivery's retry loop and is delivered on recovery; with a limit
		// each give-up puts it back in the buffer, where newer records
		// evict it.
		heldBatch bool
	}{
		{"RetryForever", retry.Unlimited, true},
		{"GiveUpAndRequeue", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktest.NewFake()
			start := fake.Now()
			c := newCollector()
			obs := newRecObserver()
			q := queue.New(queue.Config[int]{
				Name:     "telemetry",
				Capacity: capacity,
				MaxBatch: batch,
				Linger:   time.Second,
				Observer: obs,
				Policy: &retry.Policy{
					MaxAttempts: tc.maxAttempts,
					Backoff:     backoff.Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full, Rand: backoff.NewSource(7)},
					Clock:       fake,
				},
			}, c.deliver)

			next := 1
			offer := func(n int) {
				for range n {
					q.Offer(next)
					next++
				}
			}
			bounded := func() {
				t.Helper()
				s := q.Stats()
				checkInvariant(t, s)
				if s.Buffered > capacity || s.InFlight > batch {
					t.Fatalf("memory not bounded: %+v", s)
				}
			}

			offer(batch) // a full batch is due at once
			if got := c.next(t, errDown); !slices.Equal(got, seq(1, batch)) {
				t.Fatalf("first delivery %v", got)
			}
			var delivered []int
			waits := 0
			for {
				fake.BlockUntil(1) // the worker waits: a retry's backoff or the queue's pause
				offer(15)          // arrive during the wait
				bounded()
				fake.Advance(fake.Deadlines()[0])
				waits++
				cl := c.await(t)
				if fake.Now().Before(start.Add(outage)) {
					cl.reply <- errDown
					continue
				}
				// Recovered. Everything pending now (the batch in flight
				// and the buffer) is delivered, the backlog in full
				// batches without waiting.
				s := q.Stats()
				pending := int(s.Pending)
				cl.reply <- nil
				delivered = append(delivered, cl.batch...)
				for len(delivered) < pending {
					delivered = append(delivered, c.next(t, nil)...)
					bounded()
				}
				break
			}
			if fake.Now().Sub(start) > outage+2*time.Second {
				t.Fatalf("recovery noticed only at %v", fake.Now().Sub(start))
			}
			closeAll(t, q)

			offered := next - 1
			newest := seq(offered-capacity+1, offered)
			want := newest
			if tc.heldBatch {
				want = append(seq(1, batch), newest...)
			}
			if !slices.Equal(delivered, want) {
				t.Fatalf("delivered %v,\nwant %v", delivered, want)
			}
			s := q.Stats()
			checkInvariant(t, s)
			if s.Offered != uint64(offered) || s.Delivered != uint64(len(want)) || s.Pending != 0 ||
				s.DroppedFull != uint64(offered-len(want)) || s.DroppedPermanent != 0 {
				t.Fatalf("stats %+v after %d offered", s, offered)
			}
			if d, _ := obs.snapshot(); d[queue.DropFull] != int(s.DroppedFull) {
				t.Fatalf("observer saw %d drops, stats %d", d[queue.DropFull], s.DroppedFull)
			}
			t.Logf("%d clock waits, %d offered, %d delivered, %d dropped", waits, offered, s.Delivered, s.DroppedFull)
		})
	}
}
