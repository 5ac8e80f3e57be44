package clocktest

import (
	"sync"
	"testing"
	"time"
)

// TestConcurrentAdvanceLosesNoTime: an Advance(1ms) made while an
// Advance(2ms) is still firing a timer on its way must move the clock on
// by its own 1ms: the clock ends 3ms on, not 2ms (the later call computed
// its target from the time reached so far and the first call's target
// then hid it).
func TestConcurrentAdvanceLosesNoTime(t *testing.T) {
	f := NewFake()
	start := f.Now()
	inCallback, release := make(chan struct{}), make(chan struct{})
	f.AfterFunc(time.Millisecond, func() {
		close(inCallback)
		<-release
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Advance(2 * time.Millisecond)
	}()
	<-inCallback // the first Advance is at 1ms, firing the timer
	f.Advance(time.Millisecond)
	close(release)
	wg.Wait()
	if got := f.Since(start); got != 3*time.Millisecond {
		t.Fatalf("after Advance(2ms) and Advance(1ms) the clock is %v on, want 3ms", got)
	}
}

// TestConcurrentAdvancesSum: many goroutines advancing at once move the
// clock by the sum of their advances, and every timer on the way fires
// once.
func TestConcurrentAdvancesSum(t *testing.T) {
	f := NewFake()
	start := f.Now()
	var fired sync.WaitGroup
	const timers = 50
	fired.Add(timers)
	for i := range timers {
		f.AfterFunc(time.Duration(i+1)*time.Millisecond, fired.Done)
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Advance(time.Millisecond)
		}()
	}
	wg.Wait()
	fired.Wait() // a timer fired twice would panic: negative WaitGroup counter
	if got := f.Since(start); got != 100*time.Millisecond {
		t.Fatalf("100 concurrent Advance(1ms) moved the clock %v, want 100ms", got)
	}
}

// TestZeroTimerInCallbackDoesNotJump: a timer due at once, made by a
// callback that Advance is running, fires at the callback's time without
// moving the clock on to Advance's target.
func TestZeroTimerInCallbackDoesNotJump(t *testing.T) {
	f := NewFake()
	start := f.Now()
	var at time.Duration = -1
	f.AfterFunc(time.Millisecond, func() {
		f.AfterFunc(0, func() { at = f.Since(start) })
		if at != time.Millisecond {
			t.Errorf("a zero timer made at 1ms fired at %v", at)
		}
	})
	f.Advance(2 * time.Millisecond)
	if got := f.Since(start); got != 2*time.Millisecond {
		t.Fatalf("clock %v on, want 2ms", got)
	}
}
