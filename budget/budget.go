package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"

	"github.com/stormguard/stormguard/retry"
)

// The three budgets implement retry.Budget; Ratio also hears what each
// retry paid (retry.PricedBudget), Concurrency follows attempts in flight
// (retry.BudgetTracker).
var (
	_ retry.PricedBudget  = (*Ratio)(nil)
	_ retry.Budget        = (*Window)(nil)
	_ retry.BudgetTracker = (*Concurrency)(nil)
)

// ErrInvalidConfig is wrapped by every error a config's Validate returns.
var ErrInvalidConfig = errors.New("budget: invalid config")

// Stats are a budget's cumulative counters since it was made. Every budget
// fills Requests, Retries, Granted and Refused; Deposits and Refunded are
// described with each budget.
type Stats struct {
	// Requests counts first attempts recorded (Record with retry false).
	Requests uint64
	// Retries counts retry attempts recorded (Record with retry true).
	Retries uint64
	// Deposits counts Records that paid into the budget: successful first
	// attempts for Ratio; every first attempt for Window (it budgets on
	// traffic, not outcomes); Concurrency has no deposits and leaves it 0.
	Deposits uint64
	// Granted counts Withdraw calls that allowed a retry.
	Granted uint64
	// Refused counts Withdraw calls that refused one.
	Refused uint64
	// Refunded counts granted retries given back unused through Refund
	// (Concurrency only).
	Refunded uint64
}

// invalid returns an error wrapping ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// ratioError reports a share outside its range, naming the field and the
// unit.
func ratioError(field string, v float64) error {
	return invalid("%s is %v, want a fraction from 0 to 1 (0.2 is 20%%; negative: none)", field, v)
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// IsTimeout reports whether err says an attempt ran out of time: it matches
// retry.ErrAttemptTimeout (the attempt was cut by Policy.AttemptTimeout) or
// context.DeadlineExceeded, or it is a net.Error whose Timeout method
// reports true. Ratio charges TimeoutCost for retries after such failures.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, retry.ErrAttemptTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// CountsAsFailure reports whether a failed attempt's error speaks of the
// downstream's health, as Ratio judges it for FailureCost: not nil, not a
// retry.Permanent error, not the caller's cancellation (context.Canceled).
func CountsAsFailure(err error) bool {
	return err != nil && !retry.IsPermanent(err) && !errors.Is(err, context.Canceled)
}
