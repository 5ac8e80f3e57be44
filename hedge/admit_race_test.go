package hedge_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// stripeSuccesses sums the breaker's striped success counters, read at the
// offsets the breaker registered with internal/fastpath.
func stripeSuccesses(b *breaker.Breaker) (n uint64) {
	for i := range stripe.N {
		n += atomic.LoadUint64((*uint64)(unsafe.Add(unsafe.Pointer(b), fastpath.Breaker.Successes.Off+uintptr(i)*fastpath.Breaker.Successes.Stride)))
	}
	return n
}

// TestAdmitReadsBreakerStateOnce: hedge's fused first attempt must read
// the breaker's state once. Read twice, a trip between the reads admitted
// the attempt in the Open state with no done (the breaker bypassed) and
// counted its success into the closed state's counters while open. Here
// op returns only after another goroutine tripped the breaker, so an
// attempt admitted in the closed state can never count its success (the
// state is no longer current), and one admitted after the trip is
// refused: no success may be counted. It is a race, caught in some trials
// (0.7 to 6.5 s of them before the fix): the loop is bounded, so it never
// fails falsely and catches a regression now and then.
func TestAdmitReadsBreakerStateOnce(t *testing.T) {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, SuccessThreshold: 1, MaxProbes: 1, Clock: clk})
	p := &retry.Policy{Breaker: b, MaxAttempts: 2}
	h := &hedge.Hedger{Policy: p, Delay: time.Hour}
	bad, admittedOpen := 0, 0
	deadline := time.Now().Add(time.Second)
	trials := 0
	for ; trials < 200000 && time.Now().Before(deadline) && bad == 0; trials++ {
		if b.State() != breaker.Closed {
			t.Fatalf("state %v at trial start", b.State())
		}
		var start atomic.Bool
		tripped := make(chan struct{})
		var s1 uint64
		spin := rand.IntN(300)
		go func() {
			for !start.Load() {
			}
			x := 0
			for i := 0; i < spin; i++ {
				x += i
			}
			_ = x
			d, err := b.Allow()
			if err != nil {
				panic(err)
			}
			d(errors.New("down"))
			s1 = stripeSuccesses(b)
			close(tripped)
		}()
		start.Store(true)
		ran := false
		_, err := hedge.Do(context.Background(), h, func(context.Context) (int, error) {
			ran = true
			<-tripped
			return 1, nil
		}, nil)
		<-tripped
		s2 := stripeSuccesses(b)
		if s2 != s1 {
			bad++
			t.Errorf("trial %d: a success was counted into the closed-state counters while the breaker was open (%d -> %d); ran=%v err=%v", trials, s1, s2, ran, err)
		}
		_ = admittedOpen
		// close the breaker again: the open period ends, one probe succeeds
		clk.Advance(2 * time.Second)
		d, err := b.Allow()
		if err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		d(nil)
		runtime.Gosched()
	}
	t.Logf("%d trials", trials)
}
