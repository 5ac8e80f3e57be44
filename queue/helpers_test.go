package queue_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// call is one delivery as seen by a scripted collector: the test reads it
// and answers with the error the delivery returns.
type call struct {
	batch []int
	reply chan error
}

// collector is a deliver function driven step by step by the test.
type collector struct {
	calls chan call
}

func newCollector() *collector { return &collector{calls: make(chan call)} }

func (c *collector) deliver(ctx context.Context, batch []int) error {
	cl := call{batch: slices.Clone(batch), reply: make(chan error, 1)}
	select {
	case c.calls <- cl:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-cl.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits for the next delivery and answers it with err.
func (c *collector) next(t *testing.T, err error) []int {
	t.Helper()
	cl := c.await(t)
	cl.reply <- err
	return cl.batch
}

// await waits for the next delivery, which the caller must answer.
func (c *collector) await(t *testing.T) call {
	t.Helper()
	select {
	case cl := <-c.calls:
		return cl
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		t.Fatal("no delivery")
		return call{}
	}
}

// none checks that no delivery is being made right now.
func (c *collector) none(t *testing.T) {
	t.Helper()
	select {
	case cl := <-c.calls:
		t.Fatalf("unexpected delivery of %v", cl.batch)
	default:
	}
}

// noJitter is a deterministic policy for tests on the fake clock.
func noJitter(fake *clocktest.Fake, maxAttempts int) *retry.Policy {
	return &retry.Policy{
		MaxAttempts: maxAttempts,
		Backoff:     backoff.Exponential{Base: time.Second, Max: 8 * time.Second},
		Clock:       fake,
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// fataler is *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func checkInvariant(t fataler, s queue.Stats) {
	t.Helper()
	if s.Pending != s.Buffered+s.InFlight {
		t.Fatalf("Pending %d != Buffered %d + InFlight %d", s.Pending, s.Buffered, s.InFlight)
	}
	if s.Offered != s.Delivered+s.DroppedFull+s.DroppedPermanent+s.Pending {
		t.Fatalf("invariant broken: %+v", s)
	}
}

// closer is a Queue or a Scheduler.
type closer interface {
	Close(context.Context) (int, error)
}

// expired returns a context that has already ended.
func expired() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// closeNow closes q at once, whatever is left.
func closeNow(q closer) { q.Close(expired()) }

// closeAll closes q without a deadline and checks that nothing was left.
func closeAll(t testing.TB, q closer) {
	t.Helper()
	if n, err := q.Close(context.Background()); n != 0 || err != nil {
		t.Fatalf("Close = %d, %v", n, err)
	}
}

// closeEitherWay ends a property test's run: gracefully, answering every
// request that arrives on reqs with success (through succeed) and moving the
// fake clock through every wait until Close has finished everything, or
// abruptly, with an expired context, when Close must report what it left
// with ErrClosed. It returns the count Close returned.
func closeEitherWay[R any](t fataler, graceful bool, fake *clocktest.Fake, q closer, reqs <-chan R, succeed func(R)) int {
	t.Helper()
	if !graceful {
		n, err := q.Close(expired())
		if (n == 0) != (err == nil) || (err != nil && !errors.Is(err, queue.ErrClosed)) {
			t.Fatalf("Close = %d, %v", n, err)
		}
		return n
	}
	stop := make(chan struct{})
	var helper sync.WaitGroup
	helper.Add(1)
	go func() {
		defer helper.Done()
		for {
			select {
			case <-stop:
				return
			case r := <-reqs:
				succeed(r)
			default:
				if d := fake.Deadlines(); len(d) > 0 {
					fake.Advance(d[0])
				}
				runtime.Gosched()
			}
		}
	}()
	n, err := q.Close(context.Background())
	close(stop)
	helper.Wait()
	if n != 0 || err != nil {
		t.Fatalf("graceful Close = %d, %v", n, err)
	}
	return n
}

// recObserver records Observer calls.
type recObserver struct {
	mu      sync.Mutex
	dropped map[string]int
	depths  []int
	names   map[string]bool
}

func newRecObserver() *recObserver {
	return &recObserver{dropped: map[string]int{}, names: map[string]bool{}}
}

func (o *recObserver) QueueDropped(q, reason string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names[q] = true
	o.dropped[reason] += n
}

func (o *recObserver) QueueDepth(q string, depth int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names[q] = true
	o.depths = append(o.depths, depth)
}

func (o *recObserver) snapshot() (map[string]int, []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := map[string]int{}
	for k, v := range o.dropped {
		d[k] = v
	}
	return d, slices.Clone(o.depths)
}

var errDown = errors.New("collector down")
