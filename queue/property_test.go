package queue_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// fateCollector is a scripted collector that also records the fate of
// every record as the queue learns it: delivered (it returned nil) or
// rejected (it returned a permanent error).
type fateCollector struct {
	collector
	mu        sync.Mutex
	delivered []int
	rejected  []int
}

func (c *fateCollector) deliver(ctx context.Context, batch []int) error {
	err := c.collector.deliver(ctx, batch)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.delivered = append(c.delivered, batch...)
	case retry.IsPermanent(err):
		c.rejected = append(c.rejected, batch...)
	}
	return err
}

func (c *fateCollector) fates() (delivered, rejected []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.delivered), slices.Clone(c.rejected)
}

// TestAccountingInvariant checks, under random interleavings of offers,
// successful, failing and rejecting deliveries, clock moves and a graceful
// or abrupt Close, that Offered == Delivered + DroppedFull +
// DroppedPermanent + Pending in every snapshot (including those taken by a
// concurrent reader at arbitrary instants), that memory stays bounded, and
// that no record is delivered twice or both delivered and rejected.
func TestAccountingInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fake := clocktest.NewFake()
		workers := rapid.IntRange(1, 3).Draw(rt, "workers")
		capacity := rapid.IntRange(1, 16).Draw(rt, "capacity")
		maxBatch := rapid.IntRange(1, 6).Draw(rt, "maxBatch")
		cfg := queue.Config[int]{
			Capacity: capacity,
			MaxBatch: maxBatch,
			Workers:  workers,
			Overflow: rapid.SampledFrom([]queue.Overflow{queue.DropOldest, queue.DropNewest}).Draw(rt, "overflow"),
			Linger:   rapid.SampledFrom([]time.Duration{-1, 500 * time.Millisecond}).Draw(rt, "linger"),
			Policy: &retry.Policy{
				MaxAttempts: rapid.IntRange(0, 3).Draw(rt, "maxAttempts"),
				Backoff:     backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Full, Rand: backoff.NewSource(1)},
				Clock:       fake,
			},
		}
		if rapid.Bool().Draw(rt, "sized") {
			cfg.Size = func(id int) int { return id%5 + 1 }
			cfg.MaxBatchBytes = rapid.IntRange(1, 12).Draw(rt, "maxBatchBytes")
		}
		c := &fateCollector{collector: *newCollector()}
		q := queue.New(cfg, c.deliver)
		defer closeNow(q) // also when rapid discards this case midway
		held := min(maxBatch, capacity) * workers

		// A reader checks every snapshot it can get while the test runs.
		stopReader := make(chan struct{})
		torn := make(chan queue.Stats, 1)
		var readerDone sync.WaitGroup
		readerDone.Add(1)
		go func() {
			defer readerDone.Done()
			for {
				select {
				case <-stopReader:
					return
				default:
				}
				s := q.Stats()
				if s.Offered != s.Delivered+s.DroppedFull+s.DroppedPermanent+s.Pending || s.Pending != s.Buffered+s.InFlight {
					select {
					case torn <- s:
					default:
					}
				}
				runtime.Gosched()
			}
		}()
		defer func() {
			close(stopReader)
			readerDone.Wait()
		}()

		next := 1
		respond := func(rt *rapid.T, err error) {
			select {
			case cl := <-c.calls:
				cl.reply <- err
			default:
				rt.Skip("no delivery in progress")
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"offer": func(rt *rapid.T) {
				for range rapid.IntRange(1, 8).Draw(rt, "n") {
					q.Offer(next)
					next++
				}
			},
			"succeed":   func(rt *rapid.T) { respond(rt, nil) },
			"fail":      func(rt *rapid.T) { respond(rt, errDown) },
			"failAfter": func(rt *rapid.T) { respond(rt, retry.After(errDown, 2*time.Second)) },
			"reject":    func(rt *rapid.T) { respond(rt, retry.Permanent(errors.New("400"))) },
			"advance": func(rt *rapid.T) {
				fake.Advance(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond)
			},
			"": func(rt *rapid.T) {
				s := q.Stats()
				checkInvariant(rt, s)
				if s.Buffered > uint64(capacity) || s.InFlight > uint64(held) {
					rt.Fatalf("memory not bounded: %+v", s)
				}
			},
		})

		graceful := rapid.Bool().Draw(rt, "graceful")
		remaining := closeEitherWay(rt, graceful, fake, q, c.calls, func(cl call) { cl.reply <- nil })

		s := q.Stats()
		checkInvariant(rt, s)
		select {
		case bad := <-torn:
			rt.Fatalf("a reader saw a torn snapshot: %+v", bad)
		default:
		}
		if s.Pending != uint64(remaining) || s.Offered != uint64(next-1) {
			rt.Fatalf("stats %+v, remaining %d, offered %d", s, remaining, next-1)
		}
		delivered, rejected := c.fates()
		if uint64(len(delivered)) != s.Delivered {
			rt.Fatalf("collector accepted %d records, stats say %d delivered", len(delivered), s.Delivered)
		}
		if graceful && uint64(len(rejected)) != s.DroppedPermanent || s.DroppedPermanent > uint64(len(rejected)) {
			rt.Fatalf("collector rejected %d records, stats say %d", len(rejected), s.DroppedPermanent)
		}
		seen := map[int]bool{}
		for _, id := range slices.Concat(delivered, rejected) {
			if seen[id] || id < 1 || id >= next {
				rt.Fatalf("record %d delivered or rejected twice (or never offered)", id)
			}
			seen[id] = true
		}
	})
}
