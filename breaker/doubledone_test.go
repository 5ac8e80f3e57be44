package breaker

import (
	"testing"
	"time"
)

// TestTimedDoneCalledTwiceIsNoOp: the done of a call timed for
// SlowCallDuration, called a second time after the record went back to
// the pool and was handed to the next call, must not record onto that
// call's record (which also made the next call's own done be ignored).
// On the start commit 100 of 200 successes were counted as failures.
func TestTimedDoneCalledTwiceIsNoOp(t *testing.T) {
	b, _ := newTest(t, Config{Window: Window{Calls: 1000, MinCalls: 1000, SlowCallDuration: time.Hour, FailureRatio: 1}})
	for range 100 {
		first, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		first(nil)
		next, err := b.Allow() // may get first's record from the pool
		if err != nil {
			t.Fatal(err)
		}
		first(errDown) // a second call: must change nothing
		next(nil)
	}
	c := b.Counts()
	if c.Successes != 200 || c.Failures != 0 {
		t.Fatalf("counts %+v after 200 successes whose first done was called twice: want 200 successes, 0 failures", c)
	}
}
