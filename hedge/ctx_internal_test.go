package hedge

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestAttemptCtxRaces runs cancel against Done, Err and the parent's own
// end from several goroutines, many times over: whatever the order, once
// cancel has returned, Done is closed and Err reports an end; Err never
// reports an end before Done is closed for whoever holds Done, and never
// changes once it has reported one.
func TestAttemptCtxRaces(t *testing.T) {
	for i := range 2000 {
		parent, cancelParent := context.WithCancel(context.Background())
		c := newAttemptCtx(parent, 1, false)
		var wg sync.WaitGroup
		var first error
		var mu sync.Mutex
		check := func(err error) {
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
			} else if err != first {
				t.Errorf("round %d: Err changed from %v to %v", i, first, err)
			}
		}
		wg.Add(4)
		go func() { defer wg.Done(); c.cancel() }()
		go func() {
			defer wg.Done()
			d := c.Done()
			for range 50 {
				err := c.Err()
				check(err)
				if err != nil {
					select {
					case <-d:
					case <-time.After(10 * time.Second):
						t.Errorf("round %d: Err = %v and Done still open", i, err)
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				check(c.Err())
			}
		}()
		go func() {
			defer wg.Done()
			if i%3 == 0 {
				cancelParent()
			}
		}()
		wg.Wait()
		select {
		case <-c.Done():
		default:
			t.Fatalf("round %d: Done open after cancel", i)
		}
		err := c.Err()
		check(err)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Err = %v, want context.Canceled", i, err)
		}
		cancelParent()
	}
}

// TestAttemptCtxEnds covers each state once, in order.
func TestAttemptCtxEnds(t *testing.T) {
	dl, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	cases := []struct {
		name   string
		parent context.Context
		done   bool // call Done before cancel
		want   error
	}{
		{"unmaterialized", context.Background(), false, context.Canceled},
		{"materialized", context.Background(), true, context.Canceled},
		{"parent ended", dl, false, context.DeadlineExceeded},
		{"parent ended, materialized", dl, true, context.DeadlineExceeded},
	}
	for _, tc := range cases {
		c := newAttemptCtx(tc.parent, 2, true)
		if tc.done {
			c.Done()
		}
		if tc.parent.Err() == nil && c.Err() != nil {
			t.Errorf("%s: Err before cancel = %v", tc.name, c.Err())
		}
		c.cancel()
		c.cancel() // a second cancel keeps the first end
		if err := c.Err(); err != tc.want {
			t.Errorf("%s: Err = %v, want %v", tc.name, err, tc.want)
		}
		<-c.Done() // materializes now if it had not been: closed at once
		if err := c.Err(); err != tc.want {
			t.Errorf("%s: Err after Done = %v, want %v", tc.name, err, tc.want)
		}
		if n, hedge, ok := AttemptOf(c); n != 2 || !hedge || !ok {
			t.Errorf("%s: AttemptOf = %d, %v, %v", tc.name, n, hedge, ok)
		}
	}
}
