package adaptertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// Both adapters hear hedges.
var (
	_ hedge.Observer = (*promretry.Collector)(nil)
	_ hedge.Observer = (*otelretry.Observer)(nil)
)

// TestHedgeEventsReachBothAdaptersInMulti: with retry.Multi(promretry,
// otelretry) as the Policy's Observer, a real hedge.Do on a fake clock
// (a hedge exactly at the delay, which wins) is counted by both, under
// the same names and labels.
func TestHedgeEventsReachBothAdaptersInMulti(t *testing.T) {
	coll, obs, regs := adapters(t)
	clk := clocktest.NewFake()
	p := &retry.Policy{Operation: "search", MaxAttempts: 3, Clock: clk, Observer: retry.Multi(coll, obs)}
	h := &hedge.Hedger{Policy: p, Delay: 20 * time.Millisecond}
	started := make(chan int, 4)
	answer := make(chan struct{})
	op := func(ctx context.Context) (int, error) {
		n0, _, _ := hedge.AttemptOf(ctx)
		started <- n0
		if n0 == 1 {
			<-ctx.Done() // the first attempt hangs until it loses
			return 1, ctx.Err()
		}
		<-answer
		return n0, nil
	}
	out := make(chan error, 1)
	go func() {
		v, err := hedge.Do(context.Background(), h, op, nil)
		if err == nil && v != 2 {
			t.Errorf("Do = %d, want the hedge's 2", v)
		}
		out <- err
	}()
	waitStart := func(want int) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("attempt %d started, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d did not start", want)
		}
	}
	waitStart(1)
	clk.BlockUntil(1)
	clk.Advance(20 * time.Millisecond)
	waitStart(2)
	close(answer)
	select {
	case err := <-out:
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
	}
	for name, reg := range regs {
		got := series(t, reg, "stormguard_hedges_total")
		for _, r := range []string{"started", "won", "cancelled"} {
			if v := got["operation=search,result="+r]; v != 1 {
				t.Errorf("%s: stormguard_hedges_total{result=%q} = %v, want 1 (series %v)", name, r, v, got)
			}
		}
	}
}
