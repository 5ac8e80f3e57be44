package breaker

import (
	"errors"
	"strconv"
)

// State is the state of a Breaker. The numeric values match the
// stormguard_breaker_state metric.
type State uint8

// The three states of a circuit breaker.
const (
	// Closed admits every call and watches the outcomes for the trip
	// condition.
	Closed State = 0
	// HalfOpen admits at most Config.MaxProbes calls at a time to find out
	// whether the downstream has recovered.
	HalfOpen State = 1
	// Open rejects every call with ErrOpen until the open period ends.
	Open State = 2
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Errors returned by Allow, Ready and Do when a call is refused. Both are
// returned as they are (never wrapped, package-level values) so that a
// refusal costs no allocation; callers test them with errors.Is.
//
// Every refusal by a breaker matches ErrOpen: errors.Is(err, ErrOpen) is
// true for ErrTooManyProbes too, so one check catches every fast failure.
// ErrTooManyProbes stays distinguishable: errors.Is(err, ErrTooManyProbes)
// is true only for it.
var (
	// ErrOpen: the breaker is open and refuses calls. Every refusal by a
	// breaker matches it.
	ErrOpen error = errOpen
	// ErrTooManyProbes: the breaker is half-open and already has
	// Config.MaxProbes calls in flight. It matches ErrOpen as well.
	ErrTooManyProbes error = errTooManyProbes
)

// The values of ErrOpen and ErrTooManyProbes.
var (
	errOpen          = &refusal{"breaker: open"}
	errTooManyProbes = &refusal{"breaker: too many probes"}
)

// refusal is the type of ErrOpen and ErrTooManyProbes.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

// Is makes every refusal match ErrOpen.
func (e *refusal) Is(target error) bool { return target == ErrOpen }

// ErrProbeTimeout is the cause of the context handed to Config.Probe when
// Config.ProbeTimeout runs out; a probe that answers after it counts as
// failed.
var ErrProbeTimeout = errors.New("breaker: probe timed out")
