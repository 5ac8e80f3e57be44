// Package breaker is a circuit breaker: it stops calling a downstream that
// is failing, so that the callers fail fast instead of piling retries onto
// it, and it tests the downstream gently before letting traffic back.
//
//	b := breaker.New(breaker.Config{
//	    Window: breaker.Window{Duration: time.Minute, MinCalls: 20, FailureRatio: 0.3},
//	})
//	v, err := breaker.Do(ctx, b, func(ctx context.Context) (T, error) { ... })
//	if errors.Is(err, breaker.ErrOpen) { ... } // not called: failing fast (ErrTooManyProbes too)
//
// One Breaker guards one downstream and is shared by all its callers.
//
// # States
//
// A breaker is Closed (calls flow, outcomes are watched), Open (calls are
// refused with ErrOpen) or HalfOpen (at most Config.MaxProbes calls at a
// time are let through; Config.SuccessThreshold successes close the
// breaker, one failure opens it again). The trip condition moves it from
// closed to open; the open period (Config.OpenTimeout, 60s by default)
// moves it to half-open. Every state change starts a new generation, and a
// result that arrives for a call admitted in an earlier generation is
// ignored: a slow call that fails after the breaker opened does not extend
// the open period, nor does a stale success close it.
//
// Open periods can grow on repeated trips (Config.MaxOpenTimeout and
// OpenTimeoutMultiplier) and are jittered (Config.OpenJitter, 10% by
// default), so that a fleet of clients whose breakers opened together
// does not probe the recovering downstream in lockstep.
//
// With Config.Probe the breaker checks the downstream itself, a little
// before the open period ends: a healthy answer moves it to half-open at
// once, a failure restarts the open period. No real request is risked on a
// dead downstream. Call Close to stop probing.
//
// # Choosing a trip condition
//
// Exactly one condition decides when a closed breaker opens:
//
//   - Consecutive failures (Config.ConsecutiveFailures, the default with 5):
//     simple and cheap, and the fastest path (no lock; while calls
//     succeed, writes only to counters striped per processor). Right for
//     low or steady traffic, or when any run of failures means the
//     downstream is down. Under heavy traffic a small share of errors never
//     makes a long run, and a single success hides a mostly failing
//     downstream; use a rate instead.
//   - Failure rate over a count window (Window.Calls): the share of failures
//     among the last N calls, judged once Window.MinCalls calls were seen.
//     Independent of the call rate, so it reacts within N calls at any
//     traffic; but at low traffic the window can reach back a long way.
//   - Failure rate over a time window (Window.Duration, in Window.Buckets
//     buckets): the share of failures among the calls of the last period,
//     judged once Window.MinCalls calls were seen in it. Right for busy
//     services with bursty traffic, where "30% of the last minute" is the
//     question. Pick MinCalls so that a handful of calls at night cannot
//     trip it. For example 30s/5/40%, 60s/20/30% or 120s/50/25%:
//     Window{Duration: 60 * time.Second, MinCalls: 20, FailureRatio: 0.3}.
//   - Slow-call rate (Window.SlowCallDuration and SlowCallRatio), over
//     either window and alongside the failure rate, as in resilience4j: an
//     overloaded downstream slows down before it fails, and opening on
//     slowness sheds load while it can still recover. A slow probe in the
//     half-open state then counts as a failure.
//   - Custom (Config.ReadyToTrip): any rule over Counts, over the Window if
//     one is set, else over the calls since the breaker closed.
//
// # What counts as a failure
//
// Only failures that speak of the downstream's health count, and that is a
// separate question from whether to retry (retry.IsDownstreamFault). By
// default (DefaultIsFailure, DefaultIsExcluded) an error that reports its
// own verdict (retry.FaultReporter, as httpretry's and grpcretry's errors
// do: a 500 or an Internal is a failure though it is not retried, a 404 is
// not) counts as it says; any other error marked retry.Permanent counts as
// a success (the downstream answered; the request was wrong); the caller's
// own cancellation is not counted at all; and everything else, attempt
// timeouts and deadlines included, is a failure. retry.Fault marks an
// error as a failure whatever else it is. Config.IsFailure and
// Config.IsExcluded change this.
//
// # Allow, Do and retry
//
// Do wraps a function. Allow is the two-step form for transports and
// interceptors: ask, make the call, report its result with the returned
// done function, exactly once. In the closed state neither allocates
// (unless calls are timed for Window.SlowCallDuration: each then gets a
// done function of its own, one allocation of 24 bytes). The
// window and custom conditions take a lock to record each result; the
// consecutive-failures condition takes none.
//
// A Breaker is a retry.Breaker: put it in retry.Policy.Breaker (outermost
// retry, breaker inside it, attempt timeout innermost). retry.Do then asks
// the breaker before every attempt and, through Ready, before it spends
// budget on a wait: once the breaker is open, Do returns at once with an
// error that wraps both ErrOpen and the last attempt's error.
//
// # Refusals
//
// A breaker refuses a call with ErrOpen (open) or ErrTooManyProbes
// (half-open, every probe slot taken), returned as they are, without
// allocation. errors.Is(err, ErrOpen) is true for both, so one check
// catches every fast failure of a breaker (and retry.Do's error wraps
// it); errors.Is(err, ErrTooManyProbes) is true only for the second.
//
// A refusal is the cost of every call while a downstream is out, so it is
// kept to a few atomic loads: on the real clock an open breaker does not
// even read the clock, since a timer marks the end of each open period
// (Config.Clock), and retry.Do gives up with a *retry.Error the breaker
// built once (Breaker.RefusalError) unless an Observer watches the call.
//
// # Units
//
// Shares are fractions from 0 to 1 throughout, as in the rest of
// stormguard: Window.FailureRatio and Window.SlowCallRatio (0.5 is 50%,
// resilience4j's thresholds divided by 100) and Config.OpenJitter (0.1 is
// 10%). Validate rejects a value outside that range with a message naming
// the field, the value and the unit, so a percentage written by mistake
// (50 for 50%) fails at once instead of never tripping.
//
// # Panics and sharing
//
// User code the breaker runs cannot wedge it. A function passed to Do that
// panics counts as a failure (whatever Config.IsFailure says) and
// releases its half-open slot before the panic goes on; so does a
// retry.PanicError reported to a done function, and a call whose result
// Config.IsFailure or IsExcluded panics on. A Config.Probe that panics
// counts as a failed probe: the open period restarts and the next probe
// is scheduled. A listener that panics runs after the breaker's own work
// (the probe timer is already started); the other listeners still hear
// that change and every later one, and the panic goes on afterwards.
// Listeners may call the breaker, Close included.
//
// A Config may be shared by any number of breakers whatever its Rand
// holds: every draw from a Config.Rand goes through backoff.Shared, the
// lock backoff and retry take for such a source too, so even a plain
// rand.NewPCG shared with a backoff strategy or a retry.Policy cannot race.
//
// # Observing
//
// State, Counts and Generation report the breaker's condition; Subscribe
// (and Config.OnStateChange) are told of every state change, in order,
// outside the breaker's lock. Time comes from Config.Clock, so tests and
// the storm simulator drive breakers on a virtual clock
// (clocktest.Fake), and jitter from Config.Rand, so runs can be repeated.
package breaker
