package throttle

import (
	"context"
	"errors"

	"github.com/stormguard/stormguard/retry"
)

// ErrThrottled is the error of a request rejected locally by a SRE:
// it was never sent. retry.Do stops the call with it as the sentinel
// (reason "throttled"); errors.Is finds it in the call's error.
var ErrThrottled = errors.New("throttle: rejected locally by adaptive throttling")

// ErrInvalidConfig is wrapped by every error a config's Validate returns.
var ErrInvalidConfig = errors.New("throttle: invalid config")

// ErrWaitTooLong is the error of an attempt refused by an Adaptive
// limiter because the wait for its token would not end before the
// context's deadline. It matches retry.ErrDeadlineTooClose and context.DeadlineExceeded, so the
// call reads as a predictive stop for lack of time, not as a fault of the
// downstream.
var ErrWaitTooLong error = waitTooLong{}

type waitTooLong struct{}

func (waitTooLong) Error() string {
	return "throttle: the wait for a send token does not fit before the deadline"
}

func (waitTooLong) Is(target error) bool {
	return target == retry.ErrDeadlineTooClose || target == context.DeadlineExceeded
}
