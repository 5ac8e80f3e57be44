package promretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

func succeed(context.Context) (int, error) { return 1, nil }

// benchDo measures retry.Do's success path observed by obs.
func benchDo(b *testing.B, obs retry.Observer) {
	p := &retry.Policy{Operation: "bench", MaxAttempts: 3, Observer: obs}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := retry.Do(ctx, p, succeed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDo is the reference: retry.Do's success path with no observer.
func BenchmarkDo(b *testing.B) { benchDo(b, nil) }

// BenchmarkDoWithCollector is retry.Do's success path with a Collector as
// the Observer: one attempt, one call, one duration observation.
func BenchmarkDoWithCollector(b *testing.B) { benchDo(b, promretry.New(promretry.Config{})) }

// BenchmarkDoWithCollectorParallel measures contention on shared series
// when every goroutine calls the same operation.
func BenchmarkDoWithCollectorParallel(b *testing.B) {
	p := &retry.Policy{Operation: "bench", MaxAttempts: 3, Observer: promretry.New(promretry.Config{})}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := retry.Do(ctx, p, succeed); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDoWithNopObserver isolates retry.Do's own cost of having an
// observer (its clock reads), to compare BenchmarkDoWithCollector with.
func BenchmarkDoWithNopObserver(b *testing.B) { benchDo(b, retry.NopObserver{}) }

// BenchmarkCollectorSuccessEvents is the Collector's own work on the
// success path: the events Do sends for a call whose first attempt works.
func BenchmarkCollectorSuccessEvents(b *testing.B) {
	c := promretry.New(promretry.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ctx = c.AttemptStart(ctx, retry.AttemptStart{Operation: "bench", Attempt: 1})
		c.AttemptEnd(ctx, retry.AttemptEnd{Operation: "bench", Attempt: 1, Duration: time.Millisecond})
		c.CallEnd(ctx, retry.CallEnd{Operation: "bench", Attempts: 1, Duration: time.Millisecond})
	}
}

func TestCollectorSuccessPathAllocs(t *testing.T) {
	c := promretry.New(promretry.Config{})
	ctx := context.Background()
	events := func() {
		ctx = c.AttemptStart(ctx, retry.AttemptStart{Operation: "allocs", Attempt: 1})
		c.AttemptEnd(ctx, retry.AttemptEnd{Operation: "allocs", Attempt: 1, Duration: time.Millisecond})
		c.CallEnd(ctx, retry.CallEnd{Operation: "allocs", Attempts: 1, Duration: time.Millisecond})
	}
	events() // the operation's first sight creates its series
	if n := testing.AllocsPerRun(1000, events); n != 0 {
		t.Errorf("Collector events allocate %v times per call, want 0", n)
	}
	p := &retry.Policy{Operation: "allocs", MaxAttempts: 3, Observer: c}
	if n := testing.AllocsPerRun(1000, func() { _, _ = retry.Do(ctx, p, succeed) }); n > 1 {
		t.Errorf("retry.Do with a Collector allocates %v times per successful call, want at most 1", n)
	}
}

// BenchmarkCollectorQueueEventsParallel is the cost of queue.Observer
// events from many goroutines on one queue, as a Scheduler sends them on
// every Submit and a full queue on every Offer.
func BenchmarkCollectorQueueEventsParallel(b *testing.B) {
	c := promretry.New(promretry.Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.QueueDropped("bench", "full", 1)
			c.QueueDepth("bench", 8)
		}
	})
}
