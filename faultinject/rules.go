package faultinject

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// ErrInvalidRules is wrapped by every error Rules.Validate returns.
var ErrInvalidRules = errors.New("faultinject: invalid rules")

// DefaultStatus is the status of injected error responses when a Status
// field is zero.
const DefaultStatus = http.StatusServiceUnavailable

// Rules says which faults to inject. The zero value injects nothing: every
// request passes through unchanged.
//
// A Rules value handed to New or Injector.Update is copied; changing it
// afterwards has no effect on the Injector.
//
// For each request the Injector applies, in order:
//
//  1. Outages: inside a window, the window's Action (Abort, Reset or Hang),
//     ignoring the limit, the percentages and the latency.
//  2. Limit: at most Limit.Concurrency requests run at once, at most
//     Limit.Queue wait for a slot; beyond that the request is rejected with
//     Limit.Status.
//  3. One random draw picks Reset (ResetPercent), Hang (HangPercent), Abort
//     (Abort.Percent) or nothing; the three percentages add up to 100 at most.
//  4. Latency plus a uniform random share of Jitter, waited on the clock
//     while holding the request's slot; then the drawn fault, or the wrapped
//     handler or transport.
type Rules struct {
	// Latency is added to every request that gets past the limit (aborted,
	// reset and hung requests included).
	Latency time.Duration
	// Jitter adds a uniform random delay in [0, Jitter] on top of Latency.
	Jitter time.Duration

	// Abort answers a share of requests with an error status.
	Abort AbortRule

	// ResetPercent is the share of requests, in percent, whose connection is
	// reset: the server side closes the TCP connection with an RST, the
	// client side returns an error wrapping syscall.ECONNRESET.
	ResetPercent float64
	// HangPercent is the share of requests, in percent, that get no answer
	// until their caller gives up (the request's context ends).
	HangPercent float64

	// Outages are windows of time, measured from the Injector's epoch, in
	// which every request meets the window's action. When two windows
	// overlap the first one listed applies.
	Outages []Window
	// OutageCycle repeats the outage schedule every OutageCycle; every
	// window must then end within the cycle. 0: the schedule runs once.
	OutageCycle time.Duration

	// Limit caps concurrency, with a bounded queue.
	Limit Limit
}

// AbortRule answers a share of requests with an error status.
type AbortRule struct {
	// Percent is the share of requests aborted, in [0, 100].
	Percent float64
	// Status is the response status, 400–599. 0: DefaultStatus (503).
	Status int
	// RetryAfter, when positive, is sent as a Retry-After header in whole
	// seconds, rounded up. 0: no header.
	RetryAfter time.Duration
}

// Limit caps how many requests run at once, like a server with a fixed
// number of workers and a bounded accept queue. A request beyond
// Concurrency waits in a FIFO queue; it is rejected with Status at once
// when Queue requests are already waiting, and when its wait reaches
// QueueTimeout. The zero Limit lets everything through.
type Limit struct {
	// Concurrency is the most requests running at once (in the injected
	// latency, hanging or in the wrapped handler). 0: no limit.
	Concurrency int
	// Queue is the most requests waiting for a slot. 0: none wait; a
	// request finding every slot taken is rejected.
	Queue int
	// QueueTimeout bounds a request's wait in the queue, measured on the
	// Injector's clock. 0: it waits until its caller gives up.
	QueueTimeout time.Duration
	// Status is the status of a rejection, 400–599. 0: DefaultStatus (503).
	Status int
	// RetryAfter, when positive, is sent as a Retry-After header with a
	// rejection, in whole seconds rounded up.
	RetryAfter time.Duration
}

// Window is one outage: from Start until just before End, measured from the
// Injector's epoch (modulo Rules.OutageCycle when that is set), every
// request meets Action.
type Window struct {
	// Start and End bound the window, [Start, End), as times since the
	// Injector's epoch (within each cycle when Rules.OutageCycle is
	// set). Start must not be negative and End must be after Start (and
	// at most OutageCycle when that is set).
	Start time.Duration
	End   time.Duration
	// Action is Abort (the zero value, Pass, means Abort too), Reset or Hang.
	Action Action
	// Status of the Abort response, 400–599. 0: DefaultStatus (503).
	Status int
	// RetryAfter, when positive, is sent as a Retry-After header with the
	// Abort response, in whole seconds rounded up.
	RetryAfter time.Duration
}

// Clone returns a deep copy of r (its Outages slice is not shared).
func (r Rules) Clone() Rules {
	r.Outages = slices.Clone(r.Outages)
	return r
}

// IsZero reports whether r injects nothing.
func (r Rules) IsZero() bool {
	return r.Latency == 0 && r.Jitter == 0 && r.Abort == (AbortRule{}) &&
		r.ResetPercent == 0 && r.HangPercent == 0 && len(r.Outages) == 0 &&
		r.OutageCycle == 0 && r.Limit == (Limit{})
}

// Validate reports the first problem with r, as an error wrapping
// ErrInvalidRules, or nil.
func (r Rules) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"latency", r.Latency}, {"jitter", r.Jitter},
		{"abort retry_after", r.Abort.RetryAfter}, {"outage_cycle", r.OutageCycle},
		{"limit queue_timeout", r.Limit.QueueTimeout}, {"limit retry_after", r.Limit.RetryAfter},
	} {
		if d.v < 0 {
			return invalid("%s %v is negative", d.name, d.v)
		}
	}
	if r.Latency > math.MaxInt64-r.Jitter {
		return invalid("latency %v plus jitter %v overflows", r.Latency, r.Jitter)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"abort percent", r.Abort.Percent}, {"reset_percent", r.ResetPercent}, {"hang_percent", r.HangPercent}} {
		if !(p.v >= 0 && p.v <= 100) { // also rejects NaN
			return invalid("%s %v is outside [0, 100]", p.name, p.v)
		}
	}
	if sum := r.Abort.Percent + r.ResetPercent + r.HangPercent; sum > 100 {
		return invalid("abort, reset and hang percentages add up to %v, more than 100", sum)
	}
	if err := checkStatus("abort status", r.Abort.Status); err != nil {
		return err
	}
	if err := checkStatus("limit status", r.Limit.Status); err != nil {
		return err
	}
	if r.Limit.Concurrency < 0 || r.Limit.Queue < 0 {
		return invalid("limit concurrency %d and queue %d must not be negative", r.Limit.Concurrency, r.Limit.Queue)
	}
	for i, w := range r.Outages {
		if err := w.validate(r.OutageCycle); err != nil {
			return fmt.Errorf("%w (outage %d)", err, i)
		}
	}
	return nil
}

func (w Window) validate(cycle time.Duration) error {
	switch {
	case w.Start < 0:
		return invalid("outage start %v is negative", w.Start)
	case w.End <= w.Start:
		return invalid("outage end %v is not after its start %v", w.End, w.Start)
	case cycle > 0 && w.End > cycle:
		return invalid("outage end %v is past the outage_cycle %v", w.End, cycle)
	case w.RetryAfter < 0:
		return invalid("outage retry_after %v is negative", w.RetryAfter)
	}
	switch w.Action {
	case Pass, Abort, Reset, Hang:
	default:
		return invalid("outage action %v is not abort, reset or hang", w.Action)
	}
	return checkStatus("outage status", w.Status)
}

func checkStatus(name string, s int) error {
	if s != 0 && (s < 400 || s > 599) {
		return invalid("%s %d is not 0 or within 400-599", name, s)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRules}, args...)...)
}

// action returns the window's effective action (Pass means Abort).
func (w *Window) action() Action {
	if w.Action == Pass {
		return Abort
	}
	return w.Action
}

// outageAt returns the window active at pos (time since the epoch), if any.
func (r *Rules) outageAt(pos time.Duration) *Window {
	if pos < 0 {
		return nil
	}
	if r.OutageCycle > 0 {
		pos %= r.OutageCycle
	}
	for i := range r.Outages {
		if w := &r.Outages[i]; w.Start <= pos && pos < w.End {
			return w
		}
	}
	return nil
}

func statusOr(s int) int {
	if s == 0 {
		return DefaultStatus
	}
	return s
}

// retryAfterValue formats d as a Retry-After value in whole seconds, rounded
// up; "" for d <= 0.
func retryAfterValue(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return strconv.FormatInt(s, 10)
}
