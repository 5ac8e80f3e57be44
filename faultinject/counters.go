package faultinject

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Action is what the Injector does with a request.
type Action uint8

// Actions. Pass, Abort, Reset, Hang, Reject and Cancel end a request's
// passage through the Injector (exactly one per request); Queue is reported
// before a request starts waiting for a slot. Abort, Reset and Hang are also
// the actions an outage Window may take.
const (
	// Pass hands the request to the wrapped handler or transport.
	Pass Action = iota
	// Abort answers with an error status (and maybe Retry-After).
	Abort
	// Reset closes the connection with an RST (client side: an error
	// wrapping syscall.ECONNRESET).
	Reset
	// Hang gives no answer until the caller gives up.
	Hang
	// Reject answers with the Limit's status: the queue was full or the
	// wait in it timed out.
	Reject
	// Cancel: the caller gave up while the request was queued or delayed.
	Cancel
	// Queue: the request waits for a slot (reported before the wait).
	Queue
)

var actionNames = [...]string{"pass", "abort", "reset", "hang", "reject", "cancel", "queue"}

// String returns the action's lower-case name ("abort", ...).
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// ParseAction returns the action named s, as printed by String. "respond"
// is accepted as another name for Abort.
func ParseAction(s string) (Action, error) {
	if s == "respond" {
		return Abort, nil
	}
	for i, n := range actionNames {
		if n == s {
			return Action(i), nil
		}
	}
	return 0, fmt.Errorf("faultinject: unknown action %q", s)
}

// MarshalText implements encoding.TextMarshaler.
func (a Action) MarshalText() ([]byte, error) {
	if int(a) >= len(actionNames) {
		return nil, fmt.Errorf("faultinject: unknown action %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseAction.
func (a *Action) UnmarshalText(b []byte) error {
	v, err := ParseAction(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Event describes what the Injector did with one request. Config.OnEvent
// receives one with Action Queue before a request waits for a slot, and
// exactly one with the request's final action (Pass, Abort, Reset, Hang,
// Reject or Cancel) just before the Injector carries it out: for Hang,
// before the wait for the caller to give up starts; for Pass, before the
// wrapped handler or transport is called. A request whose Queue event
// panicked (or whose wait a panicking Clock ended) gets no final event;
// see Config.OnEvent.
type Event struct {
	// Action is what the Injector is about to do with the request: Queue
	// before it waits for a slot, or its final action (Pass, Abort,
	// Reset, Hang, Reject or Cancel).
	Action Action
	// Outage is true when an outage window decided the action.
	Outage bool
	// Delay is the latency the request was given (so far, for Cancel).
	Delay time.Duration
	// Waited is how long the request waited for a slot.
	Waited time.Duration
	// Request is the request (the server's or the client's).
	Request *http.Request
}

// Counters is a snapshot of what an Injector has done since it was made.
//
// Every request ends up counted by exactly one of Passed, Aborted, Resets,
// Hangs, Rejected, Canceled and Panicked, so once no request is in the
// Injector their sum (Settled) equals Requests.
type Counters struct {
	Requests uint64 `json:"requests"` // requests seen
	Passed   uint64 `json:"passed"`   // handed to the wrapped handler or transport
	Aborted  uint64 `json:"aborted"`  // answered with an error status (Abort.Percent or an outage)
	Resets   uint64 `json:"resets"`   // connection reset (ResetPercent or an outage)
	Hangs    uint64 `json:"hangs"`    // left hanging (HangPercent or an outage)
	Rejected uint64 `json:"rejected"` // refused by the Limit: queue full, wait timed out, or queued at Close
	Canceled uint64 `json:"canceled"` // caller gave up while queued or delayed
	Panicked uint64 `json:"panicked"` // a callback (Config.OnEvent on Queue, Config.Clock) panicked before the final action

	Outage     uint64        `json:"outage"`         // requests met by an outage window
	Queued     uint64        `json:"queued"`         // requests that waited for a slot
	Delayed    uint64        `json:"delayed"`        // requests given added latency
	DelayTotal time.Duration `json:"delay_total_ns"` // added latency actually waited, summed

	InFlight     int `json:"in_flight"`      // now running: past the limit, not yet finished
	Waiting      int `json:"waiting"`        // now waiting for a slot
	Hanging      int `json:"hanging"`        // now hanging
	PeakInFlight int `json:"peak_in_flight"` // the most InFlight seen
	PeakWaiting  int `json:"peak_waiting"`   // the most Waiting seen
}

// Settled returns the number of requests that have met their final action,
// or whose passage a panicking callback ended before it:
// Passed + Aborted + Resets + Hangs + Rejected + Canceled + Panicked.
func (c Counters) Settled() uint64 {
	return c.Passed + c.Aborted + c.Resets + c.Hangs + c.Rejected + c.Canceled + c.Panicked
}

// counters are the Injector's atomics: the cumulative counts and the
// Hanging gauge. The limiter keeps the other gauges.
type counters struct {
	requests, outage, queued, delayed atomic.Uint64
	delayTotal                        atomic.Int64
	byAction                          [Cancel + 1]atomic.Uint64
	hanging                           atomic.Int64
	panicked                          atomic.Uint64
}

func (c *counters) snapshot() Counters {
	// Final actions are read before Requests, so that Settled() <= Requests
	// holds in every snapshot: a request is counted in Requests first.
	s := Counters{
		Passed:     c.byAction[Pass].Load(),
		Aborted:    c.byAction[Abort].Load(),
		Resets:     c.byAction[Reset].Load(),
		Hangs:      c.byAction[Hang].Load(),
		Rejected:   c.byAction[Reject].Load(),
		Canceled:   c.byAction[Cancel].Load(),
		Panicked:   c.panicked.Load(),
		Outage:     c.outage.Load(),
		Queued:     c.queued.Load(),
		Delayed:    c.delayed.Load(),
		DelayTotal: time.Duration(c.delayTotal.Load()),
		Hanging:    int(c.hanging.Load()),
	}
	s.Requests = c.requests.Load()
	return s
}
