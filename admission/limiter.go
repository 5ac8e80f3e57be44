package admission

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/stripe"
)

// Limiter admits requests while fewer than its limit are in flight, and
// sheds the others at once or after a short wait in its queue (see
// Acquire). The limit follows the Config's Limit algorithm, which hears
// one sample per window of requests; when the algorithm keeps a no-load
// RTT (it implements NoLoadSetter, as Gradient2 and Vegas do), now and
// then the limit is pinned low for a while (Config.ProbeLength, one
// window by default) to measure the RTT without load
// (Config.ProbeInterval). Fixed, AIMD and any other Limit that is not a
// NoLoadSetter are never probed.
//
// Admission and release cost no allocation and, on the clock.Real clock,
// two reads of the monotonic clock for a timed request, none for the
// others unless requests are queued (a release then hands its slot on at
// the time it reads); a request refused at the limit reads none. The
// window's sums are kept per processor. Every request is timed, except on
// clock.Real at high rates: once a window has seen about 1024 requests,
// one request in 8, chosen at random (admitted at once or from the
// queue), is timed until a window sees fewer than 512, and the window's
// mean RTT is that of the timed ones (a random sample of all); its most
// in flight and its drops count every request. A Limiter is safe for concurrent use. Make
// one with New.
type Limiter struct {
	inflight atomic.Int64
	_        [120]byte     // inflight changes at every admission; the words below are only read then
	limit    atomic.Int64  // the limit in force: the algorithm's, or ProbeLimit while probing
	waiting  atomic.Int64  // requests in the queue
	winStart atomic.Int64  // when the current window opened, on the time line
	from     atomic.Int64  // samples of permits that started earlier are not taken
	winLen   atomic.Int64  // the current window's length: Window, or ProbeLength while probing
	mask     atomic.Uint32 // 0: every request is timed; sampleEvery-1: one in sampleEvery
	_        [84]byte

	c      Config
	clk    clock.Clock
	real   bool          // clk is clock.Real: read nanotime
	sample bool          // requests may go untimed at high rates (clock.Real)
	coin   func() uint32 // picks the timed requests while sampling
	base   time.Time     // the time line's zero, on clk
	mono   int64         // nanotime at base (real only)

	cells stripe.Array[window]

	wmu      sync.Mutex // the algorithm and the probe
	probes   bool       // the Limiter probes: ProbeInterval > 0 and the Limit is a NoLoadSetter
	probing  bool
	probeAt  int64 // when the next probe starts, on the time line (negative after a step back); read only if probes
	rand     splitmix
	algLimit int64

	q queue

	shed        [nReasons]atomic.Uint64
	queueWaits  atomic.Uint64 // requests that left the queue
	queueWaitNs atomic.Uint64 // the nanoseconds they waited there
}

// window holds one processor's share of the current window's samples:
// count timed samples of sum nanoseconds, drops (timed or not) and the
// most in flight.
type window struct {
	count, sum, drops, maxIn atomic.Int64
}

// noteIn raises the window's most in flight to in.
func (w *window) noteIn(in int64) {
	for {
		m := w.maxIn.Load()
		if in <= m || w.maxIn.CompareAndSwap(m, in) {
			return
		}
	}
}

// Sampling of RTTs on clock.Real (see Limiter).
const (
	// sampleEvery is the share of requests timed at high rates: one in
	// sampleEvery.
	sampleEvery = 8
	// sampleAbove is the number of requests in a window (estimated from
	// the timed ones) from which the next window times one request in
	// sampleEvery; below half of it every request is timed again.
	sampleAbove = 1024
)

// maxRTT is the most one RTT counts for in a window's sum (about 39
// hours), so that the sum of RTTs of a clock that jumps by centuries
// does not overflow: 65,535 of them fit.
const maxRTT = 1 << 47

// untimed is the start of a Permit whose RTT is not measured.
const untimed = math.MinInt64

// New returns a Limiter configured by c, or c's Validate error.
func New(c Config) (*Limiter, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64() // each Limiter its own jitter: servers started together probe apart
	}
	l := &Limiter{c: c, clk: clock.Or(c.Clock), rand: splitmix(seed)}
	l.real = l.clk == clock.Real
	l.sample, l.coin = l.real, cheaprand
	l.base = l.clk.Now()
	if l.real {
		l.mono = nanotime()
	}
	l.algLimit = int64(max(1, c.Limit.Limit()))
	l.limit.Store(l.algLimit)
	l.winLen.Store(int64(c.Window))
	if _, ok := c.Limit.(NoLoadSetter); ok && c.ProbeInterval > 0 {
		l.probeAt = l.probeDelay(0)
		l.probes = true
	}
	l.q.init(l)
	return l, nil
}

// now returns the time on the Limiter's time line: nanoseconds since
// base.
func (l *Limiter) now() int64 {
	if l.real {
		return nanotime() - l.mono
	}
	return int64(l.clk.Now().Sub(l.base))
}

// startTime returns the start of a request admitted at once: now, or
// untimed if the Limiter is sampling and the request is not picked.
func (l *Limiter) startTime() int64 {
	if m := l.mask.Load(); m != 0 && l.coin()&m != 0 {
		return untimed
	}
	return l.now()
}

// at returns the clock's time of t on the time line.
func (l *Limiter) at(t int64) time.Time { return l.base.Add(time.Duration(t)) }

// Permit is one admitted request. Exactly one of Release, Drop and Ignore
// must be called once it is done. The zero Permit's methods do nothing.
type Permit struct {
	l     *Limiter
	start int64
	in    int64 // in flight when admitted, itself included
}

// Release ends the request as served: its RTT is a sample of the limit.
func (p Permit) Release() { p.l.release(p, sampleOK) }

// Drop ends the request as failed for lack of capacity (it timed out, or
// a downstream said it is overloaded): AIMD shrinks the limit on it.
func (p Permit) Drop() { p.l.release(p, sampleDrop) }

// Ignore ends the request without a sample: it says nothing about the
// server's capacity (the caller went away, the handler panicked).
func (p Permit) Ignore() { p.l.release(p, sampleNone) }

const (
	sampleOK = iota
	sampleDrop
	sampleNone
)

// tryInc takes a slot if fewer than the limit are in flight and returns
// the new count, or 0.
func (l *Limiter) tryInc() int64 {
	for {
		n := l.inflight.Load()
		if n >= l.limit.Load() {
			return 0
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return n + 1
		}
	}
}

func (l *Limiter) release(p Permit, kind int) {
	if l == nil {
		return
	}
	if p.start == untimed {
		l.releaseUntimed(p, kind)
		return
	}
	l.inflight.Add(-1) // before the clock, which may panic
	end := l.releaseNow(p.start)
	if kind != sampleNone && p.start >= l.from.Load() {
		if rtt := end - p.start; rtt > 0 || kind == sampleDrop {
			w := l.cells.Local()
			w.count.Add(1)
			w.sum.Add(min(max(rtt, 0), maxRTT))
			if kind == sampleDrop {
				w.drops.Add(1)
			}
			w.noteIn(p.in)
		}
	}
	if age := end - l.winStart.Load(); age >= l.winLen.Load() || age < 0 {
		l.closeWindowAndDispatch(end)
		return
	}
	if l.waiting.Load() > 0 {
		l.q.dispatch(end)
	}
}

// releaseUntimed ends a request that was not timed: it reads no clock
// unless the queue waits for the slot, and leaves closing the window to
// a timed request. Its drop and its in flight count in the window.
func (l *Limiter) releaseUntimed(p Permit, kind int) {
	l.inflight.Add(-1)
	if kind != sampleNone {
		w := l.cells.Local()
		if kind == sampleDrop {
			w.drops.Add(1)
		}
		w.noteIn(p.in)
	}
	if l.waiting.Load() > 0 {
		l.q.dispatch(l.releaseNow(untimed))
	}
}

// releaseNow reads the time for a release that has given its slot back.
// On clock.Real it reads the monotonic clock, which cannot panic. Another
// Clock may: then the slot goes to a queued request before the panic goes
// on (the dispatch is at known, the Permit's start, or the newest queued
// request's arrival if later), so that no waiter sits on a free slot
// until the next Acquire or its timeout. The deferred dispatch is in
// clockedReleaseNow alone, off the path of clock.Real.
func (l *Limiter) releaseNow(known int64) int64 {
	if l.real {
		return nanotime() - l.mono
	}
	return l.clockedReleaseNow(known)
}

func (l *Limiter) clockedReleaseNow(known int64) int64 {
	read := false
	defer func() {
		if !read && l.waiting.Load() > 0 {
			l.q.dispatchLate(known)
		}
	}()
	end := int64(l.clk.Now().Sub(l.base))
	read = true
	return end
}

// closeWindowAndDispatch closes the window if due, then gives free slots
// to queued requests — also when the algorithm or Rand panicked, so no
// queued request waits on a slot that is free.
func (l *Limiter) closeWindowAndDispatch(end int64) {
	defer func() {
		if l.waiting.Load() > 0 {
			l.q.dispatch(end)
		}
	}()
	l.closeWindow(end)
}

// closeWindow gives the algorithm the window's sample if the window is
// due to close, and starts or ends a probe. A release that finds another
// closing the window leaves it to that one.
func (l *Limiter) closeWindow(end int64) {
	if !l.wmu.TryLock() {
		return
	}
	defer l.wmu.Unlock()
	ws := l.winStart.Load()
	age := end - ws
	if age < 0 {
		// The clock stepped back: the window, the next probe and the
		// start of the samples taken (from) move back with it, so the
		// limit keeps following samples — else every request would start
		// before from, and none be sampled, until the clock caught up.
		l.winStart.Store(end)
		if l.from.Load() > end {
			l.from.Store(end)
		}
		if l.probes {
			l.probeAt = max(l.probeAt+age, end)
		}
		return
	}
	win := int64(l.c.Window)
	if l.probing {
		win = int64(l.c.ProbeLength)
	}
	if age < win {
		return
	}
	var count int64
	for i := range stripe.N {
		count += l.cells.At(i).count.Load()
	}
	if count < int64(l.c.WindowSamples) && age < 10*win {
		return
	}
	var sum, drops, maxIn int64
	count = 0
	for i := range stripe.N {
		w := l.cells.At(i)
		count += w.count.Swap(0)
		if s := w.sum.Swap(0); s >= 0 && sum <= math.MaxInt64-s {
			sum += s
		} else {
			sum = math.MaxInt64 // saturated (a cell past 65,535 RTTs of maxRTT wraps, and reads negative)
		}
		drops += w.drops.Swap(0)
		maxIn = max(maxIn, w.maxIn.Swap(0))
	}
	l.winStart.Store(end)
	var mean time.Duration
	if count > 0 {
		mean = time.Duration(sum / count)
	}
	if l.sample {
		// Time one request in sampleEvery from the next window on if this
		// one saw sampleAbove requests or more, every one below half that.
		switch est := count * int64(l.mask.Load()+1); {
		case est >= sampleAbove && !l.probing:
			l.mask.Store(sampleEvery - 1)
		case est < sampleAbove/2:
			l.mask.Store(0)
		}
	}
	if l.probing {
		l.probing = false
		l.winLen.Store(int64(l.c.Window))
		// The limit comes back from ProbeLimit before the algorithm's
		// code runs: if SetNoLoadRTT or Limit panics, the limit is the
		// one before the probe, and the next probe comes at the next
		// window (probeAt has passed), the panic going on.
		l.limit.Store(l.algLimit)
		if s, ok := l.c.Limit.(NoLoadSetter); ok && mean > 0 && count > 0 {
			s.SetNoLoadRTT(mean)
		}
		l.algLimit = int64(max(1, l.c.Limit.Limit()))
		l.limit.Store(l.algLimit)
		l.probeAt = l.probeDelay(end)
		return
	}
	if count > 0 || drops > 0 {
		l.c.Limit.OnSample(l.at(ws), mean, int(maxIn), drops > 0)
		l.algLimit = int64(max(1, l.c.Limit.Limit()))
		l.limit.Store(l.algLimit)
	}
	if l.probes && end >= l.probeAt {
		l.probing = true
		l.winLen.Store(int64(l.c.ProbeLength))
		l.mask.Store(0)   // the probe times every request
		l.from.Store(end) // requests admitted at the old limit are not measured
		l.limit.Store(min(l.algLimit, int64(l.c.ProbeLimit)))
	}
}

// probeDelay returns when the probe after one at t starts.
func (l *Limiter) probeDelay(t int64) int64 {
	r := 0.0
	if l.c.ProbeJitter > 0 {
		if l.c.Rand != nil {
			r = l.c.Rand()
		} else {
			r = l.rand.float64()
		}
		if !(r >= 0) || r >= 1 {
			r = 0
		}
	}
	d := float64(l.c.ProbeInterval) * (1 + l.c.ProbeJitter*r)
	const maxT = float64(1<<63 - 1)
	if d >= maxT-float64(t) {
		return 1<<63 - 1
	}
	return t + int64(d)
}

// Limit returns the limit in force.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight returns the number of requests admitted and not yet released.
func (l *Limiter) InFlight() int { return int(l.inflight.Load()) }

// Queued returns the number of requests waiting in the queue.
func (l *Limiter) Queued() int {
	// Under the queue's lock: a request counts as queued once its timeout
	// is armed too (both happen under it), so that a test on a fake clock
	// that waits for Queued to rise can advance the clock at once.
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return int(l.waiting.Load())
}

// Probing reports whether the limit is pinned to measure the no-load RTT.
func (l *Limiter) Probing() bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.probing
}
