package otelretry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// TestSchedulerRefusalsApartFromDrops is the regression test of issue 18
// item 16 (refusals) for this module: a real Scheduler at MaxPending
// refuses tasks, which their callers keep; the Observer is a queue.RefusedObserver, so they are
// counted in stormguard.queue.refused, not as dropped records.
func TestSchedulerRefusalsApartFromDrops(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	s := queue.NewScheduler(queue.SchedulerConfig{
		Name:       "jobs",
		Workers:    1,
		MaxPending: 2,
		Policy:     &retry.Policy{MaxAttempts: 1},
		Observer:   h.obs, // a queue.RefusedObserver: refusals are counted apart
	})
	for i := range 5 {
		accepted := s.Submit(func(context.Context) error {
			started <- struct{}{}
			<-gate
			return nil
		}, nil)
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
	if st := s.Stats(); st.Refused != 3 {
		t.Fatalf("scheduler stats %+v, want 3 refused", st)
	}
	jobs := attribute.String("queue", "jobs")
	if got := h.value(t, "stormguard.queue.refused", jobs); got != 3 {
		t.Errorf("queue.refused{jobs} = %v, want 3", got)
	}
	if got, ok := h.point(t, "stormguard.queue.dropped_records", jobs); ok && got != 0 {
		t.Errorf("queue.dropped_records{jobs} = %v, want 0: the callers kept the refused tasks", got)
	}
	// A queue's own drops are still drops, and refusals reported as such
	// are refusals.
	h.obs.QueueDropped("events", queue.DropFull, 2)
	h.obs.QueueRefused("jobs", 1)
	h.obs.QueueDropped("jobs", otelretry.ReasonRefused, 1)
	if got := h.value(t, "stormguard.queue.dropped_records", attribute.String("queue", "events")); got != 2 {
		t.Errorf("queue.dropped_records{events} = %v, want 2", got)
	}
	if got := h.value(t, "stormguard.queue.refused", jobs); got != 5 {
		t.Errorf("queue.refused{jobs} = %v, want 5", got)
	}
}
