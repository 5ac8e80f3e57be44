package queue

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// bytesConsistent reports whether q.bytes is the sum of the buffered
// records' sizes.
func (q *Queue[T]) bytesConsistent() (got, want int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.buf.n {
		want += q.buf.size[q.buf.index(i)]
	}
	return q.bytes, want
}

func TestRequeueKeepsByteAccounting(t *testing.T) {
	for _, overflow := range []Overflow{DropOldest, DropNewest} {
		fake := clocktest.NewFake()
		calls := make(chan []string)
		replies := make(chan error)
		q := New(Config[string]{
			Capacity:      3,
			MaxBatch:      3,
			MaxBatchBytes: 10,
			Overflow:      overflow,
			Size:          func(s string) int { return len(s) },
			Linger:        time.Hour,
			Policy:        &retry.Policy{MaxAttempts: 1, Backoff: backoff.Constant{Interval: time.Second}, Clock: fake},
		}, func(_ context.Context, b []string) error {
			calls <- slices.Clone(b)
			return <-replies
		})
		check := func(when string) {
			t.Helper()
			if got, want := q.bytesConsistent(); got != want {
				t.Fatalf("%v, %s: %d bytes counted, %d buffered", overflow, when, got, want)
			}
		}
		q.Offer("aaaa")
		q.Offer("bbbb")
		q.Offer("cccc") // 12 bytes: [aaaa bbbb] is due
		if b := <-calls; !slices.Equal(b, []string{"aaaa", "bbbb"}) {
			t.Fatalf("batch %v", b)
		}
		check("after taking a batch")
		q.Offer("dd")
		q.Offer("e")
		check("after a drop while delivering")
		replies <- errors.New("down") // back to a full buffer: 2 records dropped
		fake.BlockUntil(1)
		check("after the requeue")
		s := q.Stats()
		if s.Buffered != 3 || s.DroppedFull != 2 || s.Offered != 5 {
			t.Fatalf("%v: stats %+v", overflow, s)
		}
		fake.Advance(time.Second)
		b := <-calls
		check("after taking again")
		replies <- nil
		// DropOldest dropped the failed batch, the oldest records; DropNewest
		// kept it and dropped the newest buffered records instead.
		want := []string{"cccc", "dd", "e"}
		if overflow == DropNewest {
			want = []string{"aaaa", "bbbb"}
		}
		if !slices.Equal(b, want) {
			t.Fatalf("%v: batch %v, want %v", overflow, b, want)
		}
		go func() {
			for range calls {
				replies <- nil
			}
		}()
		if n, err := q.Close(context.Background()); n != 0 || err != nil {
			t.Fatalf("Close = %d, %v", n, err)
		}
		close(calls)
		check("after Close")
	}
}

// TestClampSizeAvoidsOverflow: with MaxBatchBytes near math.MaxInt, a
// record's size counts for at most math.MaxInt/Capacity, so the buffer's
// byte count cannot overflow however large the sizes; a size above a
// small MaxBatchBytes counts as just above it.
func TestClampSizeAvoidsOverflow(t *testing.T) {
	deliver := func(context.Context, []int) error { return nil }
	q := New(Config[int]{Capacity: 4, MaxBatchBytes: math.MaxInt, Size: func(int) int { return 0 }}, deliver)
	defer q.Close(context.Background())
	if got := q.clampSize(math.MaxInt); got > math.MaxInt/4 || got <= 0 {
		t.Fatalf("clampSize(MaxInt) = %d, want in (0, MaxInt/4]", got)
	}
	if got := q.clampSize(-1); got != 0 {
		t.Fatalf("clampSize(-1) = %d", got)
	}
	q2 := New(Config[int]{Capacity: 4, MaxBatchBytes: 10, Size: func(int) int { return 0 }}, deliver)
	defer q2.Close(context.Background())
	if got := q2.clampSize(math.MaxInt); got != 11 {
		t.Fatalf("clampSize(MaxInt) = %d with MaxBatchBytes 10, want 11", got)
	}
	if got := q2.clampSize(7); got != 7 {
		t.Fatalf("clampSize(7) = %d", got)
	}
}

// With a byte limit beyond what the sizes' sum can hold (MaxBatchBytes
// above MaxInt/Capacity), a record of the largest size is still sent
// alone, as the doc says (review: two such records shared a batch).
func TestHugeByteLimitStillSendsOversizedAlone(t *testing.T) {
	got := make(chan int, 4)
	q := New(Config[int]{Capacity: 4, MaxBatch: 4, MaxBatchBytes: math.MaxInt / 2, Linger: time.Hour,
		Size: func(int) int { return math.MaxInt }}, func(_ context.Context, b []int) error {
		got <- len(b)
		return nil
	})
	q.Offer(1)
	q.Offer(2)
	if _, err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(got)
	for n := range got {
		if n != 1 {
			t.Errorf("a batch of %d records of the largest size, want each alone", n)
		}
	}
}
