package prometheus

import (
	"context"

	"github.com/stormguard/stormguard/retry"
)

var _ retry.Observer = (*Collector)(nil)

// AttemptStart counts a call into stormguard_retries_active when its second
// attempt starts. It returns ctx unchanged.
func (c *Collector) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	if c != nil && e.Attempt == 2 {
		c.ops.Get(e.Operation).active.Add(1)
	}
	return ctx
}

// AttemptEnd counts the attempt in stormguard_attempts_total.
func (c *Collector) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	if c == nil {
		return
	}
	kind := 0
	if e.Attempt > 1 {
		kind = 1
	}
	o := int(e.Outcome)
	if o >= numOutcomes {
		o = numOutcomes // unknown
	}
	c.ops.Get(e.Operation).attempts[kind][o].Add(1)
}

// RetryScheduled does nothing: the retry shows in
// stormguard_attempts_total{attempt_kind="retry"} when it runs.
func (c *Collector) RetryScheduled(context.Context, retry.RetryScheduled) {}

// CallEnd counts the call in stormguard_calls_total and
// stormguard_call_duration_seconds, takes it out of
// stormguard_retries_active if it had retried, and counts a budget refusal
// in stormguard_retry_budget_exhausted_total.
func (c *Collector) CallEnd(_ context.Context, e retry.CallEnd) {
	if c == nil {
		return
	}
	m := c.ops.Get(e.Operation)
	r := int(e.Reason)
	if r >= numReasons {
		r = numReasons // unknown
	}
	m.calls[r].Add(1)
	m.duration.observe(e.Duration)
	// A call's second attempt started (AttemptStart counted it) exactly
	// when it ends having made at least two attempts.
	if e.Attempts >= 2 {
		m.active.Add(-1)
	}
	if e.Reason == retry.ReasonBudget {
		m.budgetExhausted.Add(1)
	}
}
