package queue_test

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/queue"
)

type span struct {
	name string
}

func benchQueue(b *testing.B, deliver func(context.Context, []*span) error) *queue.Queue[*span] {
	q := queue.New(queue.Config[*span]{}, deliver) // defaults: 2048 records, batches of 512, 1 worker
	b.Cleanup(func() { closeNow(nil, q) })
	return q
}

func discard(context.Context, []*span) error { return nil }

// blockUntilDone keeps the buffer full: its delivery never finishes before
// Close, so every Offer evicts the oldest record.
func blockUntilDone(ctx context.Context, _ []*span) error {
	<-ctx.Done()
	return ctx.Err()
}

// BenchmarkOffer measures Offer from one goroutine while a worker drains
// the queue in batches.
func BenchmarkOffer(b *testing.B) {
	q := benchQueue(b, discard)
	s := &span{name: "GET /"}
	b.ReportAllocs()
	for b.Loop() {
		q.Offer(s)
	}
}

// BenchmarkOfferParallel is BenchmarkOffer from GOMAXPROCS goroutines.
func BenchmarkOfferParallel(b *testing.B) {
	q := benchQueue(b, discard)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := &span{name: "GET /"}
		for pb.Next() {
			q.Offer(s)
		}
	})
}

// BenchmarkOfferFull measures Offer when the downstream is stuck and every
// Offer drops the oldest record.
func BenchmarkOfferFull(b *testing.B) {
	q := benchQueue(b, blockUntilDone)
	s := &span{name: "GET /"}
	b.ReportAllocs()
	for b.Loop() {
		q.Offer(s)
	}
}

// BenchmarkOfferFullParallel is BenchmarkOfferFull from GOMAXPROCS
// goroutines.
func BenchmarkOfferFullParallel(b *testing.B) {
	q := benchQueue(b, blockUntilDone)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := &span{name: "GET /"}
		for pb.Next() {
			q.Offer(s)
		}
	})
}

// BenchmarkSchedulerSubmit measures Submit and one successful attempt per
// task, end to end.
func BenchmarkSchedulerSubmit(b *testing.B) {
	s := queue.NewScheduler(queue.SchedulerConfig{MaxPending: 1 << 20})
	b.Cleanup(func() { closeNow(nil, s) })
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
	b.Cleanup(func() { closeNow(nil, q) })
	s := &span{name: "GET /"}
	b.ReportAllocs()
	for b.Loop() {
		q.Offer(s)
		<-got
	}
}
