package admission_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// readCounter is a fake clock that counts its Now calls.
type readCounter struct {
	*clocktest.Fake
	reads atomic.Int64
}

func (c *readCounter) Now() time.Time { c.reads.Add(1); return c.Fake.Now() }

// TestRefusalAtTheLimitReadsNoClock: a request refused at the limit —
// every request during a storm but the few admitted — read the clock
// (and drew the sampling coin) before finding no slot, a read thrown
// away. It now reads none.
func TestRefusalAtTheLimitReadsNoClock(t *testing.T) {
	clk := &readCounter{Fake: clocktest.NewFake()}
	l, err := admission.New(admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, Clock: clk, ProbeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	before := clk.reads.Load()
	for range 10 {
		if _, err := l.TryAcquire(); !errors.Is(err, admission.ErrLimit) {
			t.Fatalf("TryAcquire at the limit: %v, want ErrLimit", err)
		}
		if _, err := l.Acquire(context.Background()); !errors.Is(err, admission.ErrShed) {
			t.Fatalf("Acquire at the limit without a queue: %v, want a shed", err)
		}
	}
	if n := clk.reads.Load() - before; n != 0 {
		t.Fatalf("20 refusals read the clock %d times, want 0", n)
	}
	p.Release()
}
