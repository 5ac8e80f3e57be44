package budget

import (
	"math"
	"sync"
)

// Defaults for zero ConcurrencyConfig fields.
const (
	DefaultConcurrencyRatio = 0.2 // ConcurrencyConfig.Ratio
	DefaultMinConcurrency   = 3   // ConcurrencyConfig.MinConcurrency
)

// ConcurrencyConfig configures a Concurrency budget. The zero value is
// Envoy's default retry budget: retries in flight at most 20% of requests in
// flight, and never fewer than 3 allowed.
type ConcurrencyConfig struct {
	// Ratio is the share of active requests that may be active retries,
	// as a fraction from 0 to MaxRatio (1): 0.2 is 20%, kept to a
	// millionth; Validate rejects larger values (20 is not 20%).
	// 0: DefaultConcurrencyRatio (0.2). Negative: none, only
	// MinConcurrency.
	Ratio float64

	// MinConcurrency is the number of active retries always allowed, so
	// that a client with few requests in flight can retry.
	// 0: DefaultMinConcurrency (3). Negative: none.
	MinConcurrency int
}

// Validate reports whether c can make a Concurrency. Errors wrap
// ErrInvalidConfig.
func (c ConcurrencyConfig) Validate() error {
	_, _, err := c.resolve()
	return err
}

func (c ConcurrencyConfig) resolve() (percent, minimum int64, err error) {
	if !finite(c.Ratio) || c.Ratio > MaxRatio {
		return 0, 0, ratioError("ConcurrencyConfig.Ratio", c.Ratio)
	}
	switch {
	case c.Ratio == 0:
		percent = toUnits(DefaultConcurrencyRatio)
	case c.Ratio > 0:
		percent = toUnits(c.Ratio)
	}
	switch {
	case c.MinConcurrency == 0:
		minimum = DefaultMinConcurrency
	case c.MinConcurrency > 0:
		minimum = int64(c.MinConcurrency)
	}
	return percent, minimum, nil
}

// Concurrency is a retry budget on retries in flight, the design of Envoy's
// retry_budget: active retries may be at most Ratio of active requests,
// and MinConcurrency retries are always allowed.
//
// Choose Concurrency when the danger is concurrent load rather than request
// rate: slow downstreams, long calls, connection pools and queues that fill
// up. It limits how many retries are outstanding at once whatever the
// traffic's rate or history, and needs no clock. It learns what is in flight
// from retry.BudgetTracker calls (Start, Record, Refund), which retry.Do
// makes; code that drives it by hand must make them too.
//
// An attempt, first or retry, is an active request from Start to Record. A
// retry is an active retry from the Withdraw that grants it until its
// attempt's Record, or until Refund if it is abandoned before it starts;
// the backoff wait counts. With A active requests, Withdraw grants a retry
// while the active retries are fewer than max(MinConcurrency,
// ⌊Ratio × A⌋).
//
// Make one with NewConcurrency and share it between every caller of one
// downstream. A Concurrency is safe for concurrent use. A nil *Concurrency
// grants every retry.
type Concurrency struct {
	percent int64 // millionths
	minimum int64

	mu      sync.Mutex
	active  int64 // attempts between Start and Record
	retries int64 // granted retries not yet recorded or refunded
	stats   Stats
}

// NewConcurrency returns a Concurrency configured by c. It panics if
// c.Validate fails.
func NewConcurrency(c ConcurrencyConfig) *Concurrency {
	percent, minimum, err := c.resolve()
	if err != nil {
		panic(err)
	}
	return &Concurrency{percent: percent, minimum: minimum}
}

// limit returns how many retries may be active. c.mu must be held.
func (c *Concurrency) limit() int64 {
	return max(c.minimum, share(c.percent, c.active)/tokenUnit)
}

// Start counts an attempt as an active request. Start on a nil Concurrency
// does nothing.
func (c *Concurrency) Start(retry bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
}

// Record ends an attempt begun by Start: it is no longer an active request,
// and a retry's reservation is released. Record on a nil Concurrency does
// nothing.
func (c *Concurrency) Record(retry bool, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.active > 0 {
		c.active--
	}
	if retry {
		c.stats.Retries++
		if c.retries > 0 {
			c.retries--
		}
	} else {
		c.stats.Requests++
	}
	c.mu.Unlock()
}

// Withdraw reserves an active retry if fewer than max(MinConcurrency,
// ⌊Ratio × active requests⌋) are active. Withdraw on a nil Concurrency
// returns true.
func (c *Concurrency) Withdraw(err error) bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	ok := c.retries < c.limit()
	if ok {
		c.retries++
		c.stats.Granted++
	} else {
		c.stats.Refused++
	}
	c.mu.Unlock()
	return ok
}

// Refund releases a retry granted by Withdraw that will not start. Refund
// on a nil Concurrency does nothing.
func (c *Concurrency) Refund() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.retries > 0 {
		c.retries--
		c.stats.Refunded++
	}
	c.mu.Unlock()
}

// Available returns how many more retries may be active now, for metrics
// (stormguard_retry_budget_tokens). A nil Concurrency reports +Inf.
func (c *Concurrency) Available() float64 {
	if c == nil {
		return math.Inf(1)
	}
	c.mu.Lock()
	a := c.limit() - c.retries
	c.mu.Unlock()
	return float64(max(a, 0))
}

// Active returns the requests and the retries active now. A nil
// Concurrency reports zeros.
func (c *Concurrency) Active() (requests, retries int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active, c.retries
}

// Stats returns the Concurrency's counters since it was made. Deposits is
// always 0. A nil Concurrency reports zeros.
func (c *Concurrency) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
