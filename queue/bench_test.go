package queue_test

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/queue"
)

type span struct {
	name string
}

func discard(context.Context, []*span) error { return nil }

// blockUntilDone keeps the buffer full: its delivery never finishes before
// Close, so every Offer evicts the oldest record.
func blockUntilDone(ctx context.Context, _ []*span) error {
	<-ctx.Done()
	return ctx.Err()
}

// benchOffer measures Offer on a Queue of the default Config (2048 records,
// batches of 512, one worker) that delivers through deliver: from one
// goroutine, or from GOMAXPROCS goroutines if parallel.
func benchOffer(b *testing.B, deliver func(context.Context, []*span) error, parallel bool) {
	q := queue.New(queue.Config[*span]{}, deliver)
	b.Cleanup(func() { closeNow(q) })
	b.ReportAllocs()
	if !parallel {
		s := &span{name: "GET /"}
		for b.Loop() {
			q.Offer(s)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		s := &span{name: "GET /"}
		for pb.Next() {
			q.Offer(s)
		}
	})
}

// BenchmarkOffer measures Offer from one goroutine while a worker drains
// the queue in batches.
func BenchmarkOffer(b *testing.B) { benchOffer(b, discard, false) }

// BenchmarkOfferParallel is BenchmarkOffer from GOMAXPROCS goroutines.
func BenchmarkOfferParallel(b *testing.B) { benchOffer(b, discard, true) }

// BenchmarkOfferFull measures Offer when the downstream is stuck and every
// Offer drops the oldest record.
func BenchmarkOfferFull(b *testing.B) { benchOffer(b, blockUntilDone, false) }

// BenchmarkOfferFullParallel is BenchmarkOfferFull from GOMAXPROCS
// goroutines.
func BenchmarkOfferFullParallel(b *testing.B) { benchOffer(b, blockUntilDone, true) }

// BenchmarkSchedulerSubmit measures Submit and one successful attempt per
// task, end to end.
func BenchmarkSchedulerSubmit(b *testing.B) {
	s := queue.NewScheduler(queue.SchedulerConfig{MaxPending: 1 << 20})
	b.Cleanup(func() { closeNow(s) })
	task := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		for !s.Submit(task, nil) {
		}
	}
}

// BenchmarkOfferToDelivery measures one record's trip from Offer to the
// deliver function (batches of one, no linger): the handoff latency, and
// that a successful delivery does not allocate.
func BenchmarkOfferToDelivery(b *testing.B) {
	got := make(chan struct{})
	q := queue.New(queue.Config[*span]{MaxBatch: 1, Linger: -1}, func(_ context.Context, batch []*span) error {
		got <- struct{}{}
		return nil
	})
	b.Cleanup(func() { closeNow(q) })
	s := &span{name: "GET /"}
	b.ReportAllocs()
	for b.Loop() {
		q.Offer(s)
		<-got
	}
}
