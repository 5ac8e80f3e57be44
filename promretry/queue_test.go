package promretry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stormguard/stormguard/retry"

	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/queue"
)

// TestCollectorObservesQueue runs a real queue.Queue that overflows with
// the Collector as its Observer: the exported drop count is the queue's
// own, and the depth is its pending count once it has closed.
func TestCollectorObservesQueue(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	gate := make(chan struct{})
	q := queue.New(queue.Config[int]{
		Name:     "events",
		Capacity: 4,
		MaxBatch: 4,
		Linger:   -1,
		Overflow: queue.DropNewest,
		Observer: c,
	}, func(context.Context, []int) error {
		<-gate
		return nil
	})
	for i := range 50 {
		q.Offer(i)
	}
	close(gate)
	if _, err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.DroppedFull == 0 {
		t.Fatalf("the queue dropped nothing: %+v", st)
	}
	if got := value(t, reg, "stormguard_queue_dropped_records_total", "queue", "events"); got != float64(st.DroppedFull+st.DroppedPermanent) {
		t.Errorf("queue_dropped_records_total = %v, queue stats %+v", got, st)
	}
	if got := value(t, reg, "stormguard_queue_depth", "queue", "events"); got != float64(st.Pending) {
		t.Errorf("queue_depth = %v after Close, queue has %d pending", got, st.Pending)
	}
}

// TestSchedulerRefusalsApartFromDrops is the regression test of issue 18
// item 16 (refusals): a real Scheduler at MaxPending refuses tasks, which
// their callers keep; the Collector is a queue.RefusedObserver, so they are counted in
// stormguard_queue_refused_total, not as dropped records, while a
// queue.Queue observed by the Collector itself still counts its drops.
func TestSchedulerRefusalsApartFromDrops(t *testing.T) {
	c := promretry.New(promretry.Config{})
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	s := queue.NewScheduler(queue.SchedulerConfig{
		Name:       "jobs",
		Workers:    1,
		MaxPending: 2,
		Policy:     &retry.Policy{MaxAttempts: 1},
		Observer:   c, // a queue.RefusedObserver: refusals are counted apart
	})
	task := func(context.Context) error {
		started <- struct{}{}
		<-gate
		return nil
	}
	for i := range 5 {
		accepted := s.Submit(task, nil)
		if want := i < 2; accepted != want {
			t.Fatalf("Submit %d accepted = %v, want %v", i, accepted, want)
		}
		if i == 0 {
			<-started
		}
	}
	close(gate)
	if _, err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Refused != 3 || st.Succeeded != 2 {
		t.Fatalf("scheduler stats %+v, want 3 refused and 2 succeeded", st)
	}

	qgate := make(chan struct{})
	q := queue.New(queue.Config[int]{Name: "events", Capacity: 1, MaxBatch: 1, Linger: -1,
		Overflow: queue.DropNewest, Observer: c}, func(context.Context, []int) error { <-qgate; return nil })
	for i := range 5 {
		q.Offer(i)
	}
	close(qgate)
	if _, err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.DroppedFull == 0 {
		t.Fatalf("the queue dropped nothing: %+v", st)
	}
	want := fmt.Sprintf(`
# HELP stormguard_queue_dropped_records_total Records a background retry queue dropped.
# TYPE stormguard_queue_dropped_records_total counter
stormguard_queue_dropped_records_total{queue="events"} %d
stormguard_queue_dropped_records_total{queue="jobs"} 0
# HELP stormguard_queue_refused_total Tasks a background retry Scheduler refused because it had MaxPending tasks; the caller kept them.
# TYPE stormguard_queue_refused_total counter
stormguard_queue_refused_total{queue="events"} 0
stormguard_queue_refused_total{queue="jobs"} 3
`, st.DroppedFull)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"stormguard_queue_dropped_records_total", "stormguard_queue_refused_total"); err != nil {
		t.Error(err)
	}
	// A refusal reported as such (see the report: the core change that
	// lets a Scheduler call QueueRefused) is counted the same way.
	c.QueueRefused("jobs", 2)
	c.QueueDropped("jobs", promretry.ReasonRefused, 1)
	if got := value(t, registry(t, c), "stormguard_queue_refused_total", "queue", "jobs"); got != 6 {
		t.Errorf("queue_refused_total{jobs} = %v, want 6", got)
	}
}
