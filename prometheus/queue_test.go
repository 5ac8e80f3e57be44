package prometheus_test

import (
	"context"
	"testing"

	sgprom "github.com/stormguard/stormguard/prometheus"
	"github.com/stormguard/stormguard/queue"
)

// TestCollectorObservesQueue runs a real queue.Queue that overflows with
// the Collector as its Observer: the exported drop count is the queue's
// own, and the depth is its pending count once it has closed.
func TestCollectorObservesQueue(t *testing.T) {
	c := sgprom.New(sgprom.Config{})
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
