package stripe

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// live runs n goroutines that are all alive at once and returns the Hint
// each saw.
func live(n int) []int {
	hints := make([]int, n)
	var all, done sync.WaitGroup
	all.Add(n)
	for g := range n {
		done.Go(func() {
			hints[g] = Hint()
			all.Done()
			all.Wait() // keep this stack alive until every goroutine has one
		})
	}
	done.Wait()
	return hints
}

func TestHintRange(t *testing.T) {
	for _, h := range append(live(200), Hint()) {
		if h < 0 || h >= N {
			t.Fatalf("Hint() = %d, want [0, %d)", h, N)
		}
	}
}

// Goroutines running in parallel are on distinct Ps and must get distinct
// cells. Each of GOMAXPROCS goroutines spins (holding its P) until all have
// arrived, takes its Hint, and spins until all have taken theirs. The
// scheduler may still move a goroutine between Ps (preemption, a GC
// worker), so the test takes the best of a few rounds; a Hint that ignored
// the P, or kept only bits that equal Ps share, fails every round.
func TestHintDistinctPerP(t *testing.T) {
	procs := min(runtime.GOMAXPROCS(0), N)
	if procs < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	best := 0
	for round := 0; round < 10 && best < procs; round++ {
		var arrived, hinted atomic.Int32
		hints := make([]int, procs)
		var wg sync.WaitGroup
		for g := range procs {
			wg.Go(func() {
				arrived.Add(1)
				for arrived.Load() < int32(procs) {
				}
				hints[g] = Hint()
				hinted.Add(1)
				for hinted.Load() < int32(procs) {
				}
			})
		}
		wg.Wait()
		seen := map[int]bool{}
		for _, h := range hints {
			seen[h] = true
		}
		best = max(best, len(seen))
	}
	if best < procs {
		t.Fatalf("%d goroutines running in parallel got at most %d distinct hints", procs, best)
	}
}

type pair struct{ a, b atomic.Uint64 }

// Every cell's data is at least pad bytes from any other cell's and from
// whatever precedes or follows the Array.
func TestArrayLayout(t *testing.T) {
	var holder struct {
		before uint64
		arr    Array[pair]
		after  uint64
	}
	size := unsafe.Sizeof(pair{})
	prevEnd := uintptr(unsafe.Pointer(&holder.before)) + unsafe.Sizeof(holder.before)
	for i := range N {
		p := uintptr(unsafe.Pointer(holder.arr.At(i)))
		if p-prevEnd < pad {
			t.Fatalf("cell %d starts %d bytes after the previous data, want >= %d", i, p-prevEnd, pad)
		}
		prevEnd = p + size
	}
	if after := uintptr(unsafe.Pointer(&holder.after)); after-prevEnd < pad {
		t.Fatalf("the field after the Array is %d bytes from the last cell, want >= %d", after-prevEnd, pad)
	}
	local := holder.arr.Local()
	found := false
	for i := range N {
		found = found || holder.arr.At(i) == local
	}
	if !found {
		t.Fatal("Local returned no cell of the Array")
	}
}

func TestArrayAtOutOfRange(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("At(N) did not panic")
		}
	}()
	var a Array[pair]
	a.At(N)
}

// Concurrent adds are never lost, and subtraction wraps as atomic.Uint64's.
func TestCounterExact(t *testing.T) {
	var c Counter
	const goroutines, adds = 100, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				c.Add(uint64(1 + (g+i)%3))
			}
		})
	}
	wg.Wait()
	var want uint64
	for g := range goroutines {
		for i := range adds {
			want += uint64(1 + (g+i)%3)
		}
	}
	if got := c.Load(); got != want {
		t.Fatalf("Load() = %d, want %d", got, want)
	}
	c.Add(^uint64(want - 1)) // subtract want
	if got := c.Load(); got != 0 {
		t.Fatalf("Load() = %d after subtracting the total, want 0", got)
	}
}

// While adders run, every Load lies between the adds completed before it
// started and those started before it ended, and successive Loads never
// decrease.
func TestCounterLoadDuringAdds(t *testing.T) {
	var c Counter
	var started, completed atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				started.Add(1)
				c.Add(1)
				completed.Add(1)
			}
		})
	}
	var last uint64
	for range 10000 {
		lo := completed.Load()
		got := c.Load()
		hi := started.Load()
		if got < lo || got > hi || got < last {
			close(stop)
			wg.Wait()
			t.Fatalf("Load() = %d, want within [%d, %d] and >= the previous %d", got, lo, hi, last)
		}
		last = got
	}
	close(stop)
	wg.Wait()
	if got, want := c.Load(), completed.Load(); got != want {
		t.Fatalf("Load() = %d once quiescent, want %d", got, want)
	}
}

func TestForIsAtOfTheHint(t *testing.T) {
	var a Array[pair]
	for _, h := range []int{0, 1, N - 1, N, N + 3, 1<<20 + 5, -1} {
		if got, want := a.For(h), a.At(h&(N-1)); got != want {
			t.Errorf("For(%d) is not At(%d)", h, h&(N-1))
		}
	}
	h := Pin() & (N - 1)
	Unpin()
	if h < 0 || h >= N {
		t.Fatalf("Pin()&(N-1) = %d", h)
	}
}
