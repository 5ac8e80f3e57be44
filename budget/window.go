package budget

import (
	"math"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/stripe"
)

// Defaults for zero WindowConfig fields.
const (
	DefaultWindow              = 10 * time.Second // WindowConfig.Window
	DefaultWindowRatio         = 0.2              // WindowConfig.Ratio
	DefaultMinRetriesPerSecond = 10.0             // WindowConfig.MinRetriesPerSecond
	DefaultBuckets             = 10               // WindowConfig.Buckets
)

// Limits Validate enforces on WindowConfig and ConcurrencyConfig.
const (
	// MaxRatio is the largest WindowConfig.Ratio and ConcurrencyConfig.Ratio:
	// shares are fractions, and 1 (100%) allows as many retries as
	// requests. A percentage written where a fraction belongs (20 for 20%)
	// is rejected rather than allowing twenty retries per request.
	MaxRatio   = 1.0
	MaxBuckets = 1000 // WindowConfig.Buckets
)

// WindowConfig configures a Window budget. The zero value is Finagle's
// default RetryBudget: 20% of requests plus 10 retries per second, over 10
// seconds.
type WindowConfig struct {
	// Window is how far back requests and retries are counted.
	// 0: DefaultWindow (10s).
	Window time.Duration

	// Ratio is the share of requests that may be retried, as a fraction
	// from 0 to MaxRatio (1): 0.2 is 20%, kept to a millionth; Validate
	// rejects larger values (20 is not 20%). 0: DefaultWindowRatio (0.2).
	// Negative: none, only the MinRetriesPerSecond floor.
	Ratio float64

	// MinRetriesPerSecond is a floor that lets clients with little traffic
	// retry: MinRetriesPerSecond × Window seconds retries are allowed on top
	// of the Ratio share. 0: DefaultMinRetriesPerSecond (10). Negative:
	// no floor.
	MinRetriesPerSecond float64

	// Buckets is the number of slices the window is split into; the counts
	// of the oldest slice are forgotten at once when it leaves the window.
	// More buckets slide more smoothly. Each bucket spans Window/Buckets,
	// rounded down to the nanosecond. 0: DefaultBuckets (10).
	Buckets int

	// Clock tells the time. nil: clock.Real.
	Clock clock.Clock
}

// Validate reports whether c can make a Window. Errors wrap ErrInvalidConfig.
func (c WindowConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// maxFloor bounds MinRetriesPerSecond × Window, in retries.
const maxFloor = 1e12

type windowParams struct {
	width   time.Duration // of one bucket
	buckets int
	percent int64 // share of requests, in millionths
	floor   int64 // retries allowed per window whatever the traffic, in millionths
	clock   clock.Clock
}

func (c WindowConfig) resolve() (windowParams, error) {
	switch {
	case c.Window < 0:
		return windowParams{}, invalid("WindowConfig.Window is %v, want >= 0", c.Window)
	case c.Buckets < 0 || c.Buckets > MaxBuckets:
		return windowParams{}, invalid("WindowConfig.Buckets is %d, want 0 to %d", c.Buckets, MaxBuckets)
	case !finite(c.Ratio) || c.Ratio > MaxRatio:
		return windowParams{}, ratioError("WindowConfig.Ratio", c.Ratio)
	case !finite(c.MinRetriesPerSecond):
		return windowParams{}, invalid("WindowConfig.MinRetriesPerSecond is %v, want a finite number", c.MinRetriesPerSecond)
	}
	window := c.Window
	if window == 0 {
		window = DefaultWindow
	}
	p := windowParams{buckets: c.Buckets, clock: clock.Or(c.Clock)}
	if p.buckets == 0 {
		p.buckets = DefaultBuckets
	}
	p.width = window / time.Duration(p.buckets)
	if p.width == 0 {
		return windowParams{}, invalid("WindowConfig.Window %v is too short for %d buckets", window, p.buckets)
	}
	switch {
	case c.Ratio == 0:
		p.percent = toUnits(DefaultWindowRatio)
	case c.Ratio > 0:
		p.percent = toUnits(c.Ratio)
	}
	perSecond := c.MinRetriesPerSecond
	switch {
	case perSecond == 0:
		perSecond = DefaultMinRetriesPerSecond
	case perSecond < 0:
		perSecond = 0
	}
	floor := perSecond * window.Seconds()
	if floor > maxFloor {
		return windowParams{}, invalid("WindowConfig.MinRetriesPerSecond %v over %v allows more than %g retries", c.MinRetriesPerSecond, window, float64(maxFloor))
	}
	p.floor = toUnits(floor)
	return p, nil
}

// Window is a time-windowed retry budget, the design of Finagle's
// RetryBudget: over the last Window, retries may be at most Ratio of the
// requests made plus a floor of MinRetriesPerSecond × Window seconds. With
// the defaults, a client making 1000 requests in 10 seconds may retry 300
// times in those 10 seconds, and one making none may retry 100 times.
//
// Choose Window when retries should be a share of traffic whatever the
// outcome of the calls, and when clients with little traffic must still be
// able to retry: the floor gives them a few retries per second, which a
// ratio bucket (see Ratio) would not once a bad spell had emptied it. Its
// memory is the window, so it forgets a past outage after Window and never
// saves up retries for longer.
//
// Every first attempt counts as a request, whatever its result; a retry is
// counted when Withdraw grants it. The window is split into Buckets slices
// of Window/Buckets, measured from the Window's creation on its clock;
// counts cover the current slice and the Buckets-1 before it, so a slice
// leaves the window between Window·(1-1/Buckets) and Window after it began.
//
// Make one with NewWindow and share it between every caller of one
// downstream. A Window is safe for concurrent use. A nil *Window grants
// every retry.
type Window struct {
	p     windowParams
	start time.Time

	mu       sync.Mutex
	head     int64 // number of the current slice since start
	buckets  []windowBucket
	requests int64 // sums over buckets
	retries  int64
	stats    Stats // but Retries, counted in retried

	// retried counts retry attempts recorded: the only thing Record of a
	// retry does, so it takes no lock and writes no shared cache line.
	retried stripe.Counter
}

type windowBucket struct{ requests, retries int64 }

// NewWindow returns a Window configured by c. It panics if c.Validate fails.
func NewWindow(c WindowConfig) *Window {
	p, err := c.resolve()
	if err != nil {
		panic(err)
	}
	return &Window{p: p, start: p.clock.Now(), buckets: make([]windowBucket, p.buckets)}
}

// slice returns the number of the slice holding the clock's current time.
func (w *Window) slice() int64 {
	d := w.p.clock.Since(w.start)
	if d < 0 {
		return 0
	}
	return int64(d / w.p.width)
}

// rotate makes slice n the current one, forgetting slices that left the
// window. A slice older than the current one (a caller that read the clock
// before another rotated) counts in the current one. w.mu must be held.
func (w *Window) rotate(n int64) *windowBucket {
	size := int64(len(w.buckets))
	if n > w.head {
		if n-w.head >= size {
			clear(w.buckets)
			w.requests, w.retries = 0, 0
		} else {
			for i := w.head + 1; i <= n; i++ {
				b := &w.buckets[i%size]
				w.requests -= b.requests
				w.retries -= b.retries
				*b = windowBucket{}
			}
		}
		w.head = n
	}
	return &w.buckets[w.head%size]
}

// headroom returns, in millionths of a retry, how many more retries the
// window allows: Ratio × requests + floor − retries. w.mu must be held.
func (w *Window) headroom() int64 {
	return share(w.p.percent, w.requests) + w.p.floor - w.retries*tokenUnit
}

// share returns ppm × n, saturating (the budget is then unlimited in
// practice: n would be over a trillion requests).
func share(ppm, n int64) int64 {
	if n > 0 && ppm > math.MaxInt64/4/n {
		return math.MaxInt64 / 4
	}
	return ppm * n
}

// Record counts a first attempt (retry false) as a request, whatever err
// is. Record on a nil Window does nothing.
func (w *Window) Record(retry bool, err error) {
	if w == nil {
		return
	}
	if retry {
		w.retried.Add(1)
		return
	}
	n := w.slice()
	w.mu.Lock()
	b := w.rotate(n)
	b.requests++
	w.requests++
	w.stats.Requests++
	w.stats.Deposits++
	w.mu.Unlock()
}

// Withdraw grants a retry, and counts it, if the retries within the window
// stay at most Ratio × the requests within it plus the floor once it is
// counted. Withdraw on a nil Window returns true.
func (w *Window) Withdraw(err error) bool {
	if w == nil {
		return true
	}
	n := w.slice()
	w.mu.Lock()
	b := w.rotate(n)
	ok := w.headroom() >= tokenUnit
	if ok {
		b.retries++
		w.retries++
		w.stats.Granted++
	} else {
		w.stats.Refused++
	}
	w.mu.Unlock()
	return ok
}

// Available returns how many retries would be granted now, one after the
// other, if nothing else happened: for metrics
// (stormguard_retry_budget_tokens). A nil Window reports +Inf.
func (w *Window) Available() float64 {
	if w == nil {
		return math.Inf(1)
	}
	n := w.slice()
	w.mu.Lock()
	w.rotate(n)
	h := w.headroom()
	w.mu.Unlock()
	return float64(max(h, 0) / tokenUnit)
}

// Stats returns the Window's counters since it was made. Deposits equals
// Requests.
//
// Once no call is under way the counters are exact. While calls are under
// way, Requests, Granted and Refused are read together under the Window's
// lock, and Retries after them, as a sum of per-processor cells each read
// atomically: it may include a retry granted after the others were read,
// so Retries may exceed Granted by the calls that raced with Stats. No
// counter ever decreases from one Stats to the next. A nil Window reports
// zeros.
func (w *Window) Stats() Stats {
	if w == nil {
		return Stats{}
	}
	w.mu.Lock()
	s := w.stats
	w.mu.Unlock()
	s.Retries = w.retried.Load()
	return s
}
