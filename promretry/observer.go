package promretry

import (
	"context"

	"github.com/stormguard/stormguard/retry"
)

var _ retry.Observer = (*Collector)(nil)

// AttemptStart returns ctx unchanged.
func (c *Collector) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	return ctx
}

// AttemptEnd counts the attempt in stormguard_attempts_total, and counts
// the call into stormguard_retries_active when its first attempt ends
// (whatever the outcome), until CallEnd takes it out: a call whose first
// attempt failed is counted while it decides to retry, waits for a retry
// (backoff, Retry-After) or runs one.
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
	m := c.ops.Get(e.Operation)
	m.attempts[kind][o].Add(1)
	if e.Attempt == 1 {
		m.active.Add(1)
	}
}

// RetryScheduled does nothing: the retry shows in
// stormguard_attempts_total{attempt_kind="retry"} when it runs.
func (c *Collector) RetryScheduled(context.Context, retry.RetryScheduled) {}

// CallEnd counts the call in stormguard_calls_total and
// stormguard_call_duration_seconds, takes it out of
// stormguard_retries_active if its first attempt had ended, and counts a
// budget refusal in stormguard_retry_budget_exhausted_total.
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
	if firstEnded(e) {
		m.active.Add(-1)
	}
	if e.Reason == retry.ReasonBudget {
		m.budgetExhausted.Add(1)
	}
}

// firstEnded reports whether the call that e ends had its first attempt
// ended, that is whether AttemptEnd counted it into retries_active: it
// made an attempt (every attempt begun is ended before the call ends; one
// refused before its first attempt ends with Attempts 0). The add and the
// subtraction pair up per call whatever the attempts did, so the count
// returns to zero exactly however the call ends: success, giving up before
// or after a scheduled retry (breaker, context), panic or Abandon, and a
// hedged call whichever copy won (its first attempt may succeed while a
// hedge ran: the call has two attempts and no failed first one).
func firstEnded(e retry.CallEnd) bool {
	return e.Attempts >= 1
}
