package queue

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// execute makes t's next attempt, if the Breaker and the Budget allow it,
// and decides what follows. It runs on a worker with s.mu not held; t has
// been counted in st.Running.
func (s *Scheduler) execute(t *task) {
	p := s.policy
	if s.ctx.Err() != nil {
		s.abandon(t)
		return
	}
	isRetry := t.tries > 0
	if p.Breaker != nil {
		if err := p.Breaker.Ready(); err != nil {
			s.deferTask(t, err)
			return
		}
	}
	withdrawn := false
	if isRetry && p.Budget != nil {
		if !p.Budget.Withdraw(t.last) {
			s.deferTask(t, retry.ErrBudgetExhausted)
			return
		}
		withdrawn = true
	}
	var done func(error)
	if p.Breaker != nil {
		var err error
		if done, err = p.Breaker.Allow(); err != nil {
			if withdrawn && s.tracker != nil {
				s.tracker.Refund()
			}
			s.deferTask(t, err)
			return
		}
	}
	if s.tracker != nil {
		s.tracker.Start(isRetry)
	}
	t.tries++
	s.mu.Lock()
	s.st.Attempts++
	s.mu.Unlock()

	err := s.attempt(t)

	if done != nil {
		done(err)
	}
	if p.Budget != nil {
		p.Budget.Record(isRetry, err)
	}
	switch {
	case err == nil:
		s.finish(t, nil, retry.ReasonSuccess, "")
		return
	case s.ctx.Err() != nil:
		t.last = err
		s.abandon(t)
		return
	}
	t.last = err
	if !s.retryable(err) {
		s.finish(t, &retry.Error{Attempts: t.tries, Last: err}, retry.ReasonPermanent, DropPermanent)
		return
	}
	if p.MaxAttempts > 0 && t.tries >= p.MaxAttempts {
		s.finish(t, &retry.Error{Attempts: t.tries, Reason: retry.ErrAttemptsExhausted, Last: err}, retry.ReasonAttempts, DropExhausted)
		return
	}
	delay, advised := s.nextDelay(t, err)
	if s.exceedsElapsed(t, delay) {
		s.finish(t, &retry.Error{Attempts: t.tries, Reason: retry.ErrElapsed, Last: err}, retry.ReasonDeadline, DropExhausted)
		return
	}
	if obs := p.Observer; obs != nil {
		obs.RetryScheduled(s.ctx, retry.RetryScheduled{Operation: p.Operation, Attempt: t.tries + 1, Delay: delay, Advised: advised, Err: err})
	}
	s.park(t, delay, false)
}

// attempt runs t once under AttemptTimeout and reports to the Observer.
func (s *Scheduler) attempt(t *task) error {
	p := s.policy
	actx := s.ctx
	if p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = clock.WithTimeout(s.ctx, s.clock, p.AttemptTimeout, retry.ErrAttemptTimeout)
		defer cancel()
	}
	octx := actx
	var t0 time.Time
	obs := p.Observer
	if obs != nil {
		octx = obs.AttemptStart(actx, retry.AttemptStart{Operation: p.Operation, Attempt: t.tries, Delay: t.prev})
		t0 = s.clock.Now()
	}
	err := t.fn(octx)
	outcome := retry.OutcomeSuccess
	if err != nil {
		switch {
		case s.ctx.Err() != nil:
			outcome = retry.OutcomeCanceled
		case actx != s.ctx && actx.Err() != nil:
			err = &attemptTimeout{err}
			outcome = retry.OutcomeTimeout
		case !s.retryable(err):
			outcome = retry.OutcomePermanent
		default:
			outcome = retry.OutcomeError
		}
	}
	if obs != nil {
		obs.AttemptEnd(octx, retry.AttemptEnd{Operation: p.Operation, Attempt: t.tries, Outcome: outcome, Err: err, Duration: s.clock.Since(t0)})
	}
	return err
}

// attemptTimeout is the error of an attempt cut by AttemptTimeout: it
// matches retry.ErrAttemptTimeout and wraps what the task returned.
type attemptTimeout struct{ err error }

func (a *attemptTimeout) Error() string {
	return retry.ErrAttemptTimeout.Error() + ": " + a.err.Error()
}
func (a *attemptTimeout) Is(target error) bool { return target == retry.ErrAttemptTimeout }
func (a *attemptTimeout) Unwrap() error        { return a.err }

func (s *Scheduler) retryable(err error) bool {
	if retry.IsPermanent(err) {
		return false
	}
	if s.policy.Classify != nil {
		return s.policy.Classify(err)
	}
	return retry.DefaultClassifier(err)
}

// nextDelay takes t's next backoff step and raises it to err's advice.
func (s *Scheduler) nextDelay(t *task, err error) (delay time.Duration, advised bool) {
	b := s.policy.Backoff
	if b == nil {
		b = retry.DefaultBackoff
	}
	t.step++
	t.prev = b.Delay(t.step, t.prev)
	delay = t.prev
	if adv, ok := s.advice(err); ok && adv >= delay {
		delay, advised = adv, true
	}
	return delay, advised
}

// advice returns the server-advised wait carried by err, capped by
// MaxRetryAfter and jittered upwards by at most a tenth, as retry.Do does.
func (s *Scheduler) advice(err error) (time.Duration, bool) {
	limit := s.policy.MaxRetryAfter
	if limit < 0 || err == nil {
		return 0, false
	}
	d, ok := retry.RetryAfter(err)
	if !ok || d <= 0 {
		return 0, false
	}
	if limit == 0 {
		limit = retry.DefaultMaxRetryAfter
	}
	if d >= limit {
		return limit, true
	}
	if j := min(d/10, limit-d); j > 0 {
		if src := s.policy.Rand; src != nil {
			d += time.Duration(src.Uint64() % uint64(j+1))
		} else {
			d += time.Duration(rand.Int64N(int64(j) + 1))
		}
	}
	return d, true
}

// exceedsElapsed reports whether a wait of d plus MinAttemptTime would end
// past t's MaxElapsed allowance.
func (s *Scheduler) exceedsElapsed(t *task, d time.Duration) bool {
	p := s.policy
	if p.MaxElapsed <= 0 {
		return false
	}
	need := s.clock.Now().Add(d + p.MinAttemptTime)
	return !need.Before(t.start.Add(p.MaxElapsed))
}

// deferTask puts off t's attempt, which the Breaker or the Budget refused
// with refusal, by its next backoff delay.
func (s *Scheduler) deferTask(t *task, refusal error) {
	delay, _ := s.nextDelay(t, t.last)
	if s.exceedsElapsed(t, delay) {
		last := t.last
		if last == nil {
			last = refusal
		}
		s.finish(t, &retry.Error{Attempts: t.tries, Reason: retry.ErrElapsed, Last: last}, retry.ReasonDeadline, DropExhausted)
		return
	}
	s.park(t, delay, true)
}

// park moves running task t to the timer heap, due after delay.
func (s *Scheduler) park(t *task, delay time.Duration, deferred bool) {
	s.mu.Lock()
	t.due = s.clock.Now().Add(delay)
	s.st.Running--
	if deferred {
		s.st.Deferred++
	}
	first := s.waiting.push(t)
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// abandon hands running task t to Close, which gave up.
func (s *Scheduler) abandon(t *task) {
	s.mu.Lock()
	s.st.Running--
	s.abandoned = append(s.abandoned, t)
	s.mu.Unlock()
}

// finish ends running task t with err (nil on success).
func (s *Scheduler) finish(t *task, err error, reason retry.Reason, drop string) {
	s.mu.Lock()
	s.st.Running--
	if err == nil {
		s.st.Succeeded++
	} else {
		s.st.Failed++
	}
	depth := s.pendingLocked()
	if s.closing && depth == 0 {
		s.stopLocked()
	}
	s.mu.Unlock()
	s.end(t, err, reason, drop)
	if s.obs != nil {
		s.obs.QueueDepth(s.name, int(depth))
	}
}

// end reports t's end to the observers and to its done function. It is
// called once per task, without s.mu held.
func (s *Scheduler) end(t *task, err error, reason retry.Reason, drop string) {
	p := s.policy
	if obs := p.Observer; obs != nil {
		obs.CallEnd(s.ctx, retry.CallEnd{Operation: p.Operation, Attempts: t.tries, Reason: reason, Err: err, Duration: s.clock.Since(t.start)})
	}
	if drop != "" && s.obs != nil {
		s.obs.QueueDropped(s.name, drop, 1)
	}
	if t.done != nil {
		t.done(err)
	}
}
