// Package otelretry reports stormguard's retries to OpenTelemetry: a span per
// attempt and the same metrics as the promretry module, through the OTel
// trace and metric APIs.
//
//	obs, err := otelretry.New(otelretry.Config{}) // global tracer and meter providers
//	if err != nil { ... }
//	policy := &retry.Policy{Operation: "inventory.get", Observer: obs}
//	obs.WatchBudget("inventory.get", bud)
//	obs.WatchBreaker("inventory.get", brk)
//
// # Traces
//
// Each attempt gets a span named "stormguard.attempt <operation>", a child
// of the span in the caller's context, so that every attempt of one call
// sits under the same parent in one trace. A caller without a span of its
// own gets a call span, "stormguard.call <operation>", from StartCall.
// Attempt spans carry stormguard.operation, stormguard.attempt (1 for the
// first), stormguard.attempt_kind, stormguard.delay_ms (the wait before it)
// and stormguard.outcome — the metric attributes with a "stormguard."
// prefix, with the same values; a failed attempt has an Error status,
// error.type (see ErrorType) and, when its error carries one,
// http.response.status_code (an *httpretry.StatusError, or any error with
// a StatusCode() int method) or rpc.response.status_code (a gRPC status
// error's code by name), as the semantic conventions of the pinned
// OpenTelemetry version (semconv v1.43.0) give them. The operation runs
// with the attempt span in its context, so an instrumented transport below
// it (otelhttp's, or the gRPC stats handler) makes its client span a child
// of the attempt and propagates the trace to the server on every attempt.
// The caller's span (or the call span) also gets a
// "stormguard.retry_scheduled" event per retry and a "stormguard.gave_up"
// event when the call fails.
//
// The Observer is a hedge.Observer: a hedge's attempt span has
// stormguard.hedge=true and a "stormguard.hedge.started" event with the delay, plus
// "stormguard.hedge.won" when it gives the call's result; an attempt cancelled
// because another answered first gets "stormguard.hedge.cancelled" and no Error
// status.
//
// The attempt spans tell where a slow call spent its time: the gaps
// between them are the backoff waits.
//
// # Metrics
//
// The instruments are named so that OpenTelemetry's Prometheus exporter
// (and the OTLP-to-Prometheus translation) yields the names of the
// promretry module, so the dashboard and alerts in ops/ work unchanged:
//
//	stormguard.attempts {attempt}                  -> stormguard_attempts_total{operation,attempt_kind,outcome}
//	stormguard.calls {call}                        -> stormguard_calls_total{operation,outcome}
//	stormguard.call.duration (s, histogram)        -> stormguard_call_duration_seconds{operation}
//	stormguard.retries.active {call}               -> stormguard_retries_active{operation}
//	stormguard.retry_budget.exhausted {call}       -> stormguard_retry_budget_exhausted_total{operation}
//	stormguard.retry_budget.tokens {token}         -> stormguard_retry_budget_tokens{operation}
//	stormguard.breaker.state {state}               -> stormguard_breaker_state{operation,state} (StateSet)
//	stormguard.breaker.transitions {transition}    -> stormguard_breaker_transitions_total{operation,from,to}
//	stormguard.throttle.rejection_probability      -> stormguard_throttle_rejection_probability{operation}
//	stormguard.throttle.local_rejections {attempt} -> stormguard_throttle_local_rejections_total{operation}
//	stormguard.adaptive.fill_rate                  -> stormguard_adaptive_fill_rate{operation}
//	stormguard.adaptive.measured_rate              -> stormguard_adaptive_measured_rate{operation}
//	stormguard.adaptive.waits {attempt}            -> stormguard_adaptive_waits_total{operation}
//	stormguard.adaptive.refused {attempt}          -> stormguard_adaptive_refused_total{operation}
//	stormguard.limiter.info                        -> stormguard_limiter_info{operation,limiter}
//	stormguard.breaker.info                        -> stormguard_breaker_info{operation,breaker}
//	stormguard.hedges {attempt}                    -> stormguard_hedges_total{operation,result}
//	stormguard.hedges.refused {hedge}              -> stormguard_hedges_refused_total{operation,reason}
//	stormguard.hedges.delay s                      -> stormguard_hedges_delay_seconds{operation}
//	stormguard.queue.dropped_records {record}      -> stormguard_queue_dropped_records_total{queue}
//	stormguard.queue.refused {task}                -> stormguard_queue_refused_total{queue}
//	stormguard.queue.depth {record}                -> stormguard_queue_depth{queue}
//	stormguard.config.reloads {reload}             -> stormguard_config_reloads_total{result}
//	stormguard.config.info                         -> stormguard_config_info{version}
//
// retries.active counts a call from the end of its first attempt until it
// returns, waits for a retry included; a call whose first attempt
// succeeded passes through it in the instant before it returns (a hedged
// one while its cancelled copies return), and every call adds and
// subtracts exactly once, whatever its attempts did. breaker.state has one
// point per state, 1 for the current one. A Scheduler reports to the
// Observer as a queue.RefusedObserver, so that the tasks it refuses (which their callers
// keep) count in queue.refused rather than as dropped records. Passed as
// config.Options.Observer (alone or in a retry.Multi), the Observer hears
// every reload (ConfigReload) and is told each operation's budget,
// breaker and limiter (WatchBudget, WatchBreaker, WatchLimiter) under the
// operation's name, so they join the call metrics on operation.
//
// WatchKeyed reports a group of parts per key (package keyed: breakers,
// budgets, limiters, hedge delays) without a data point per key: its
// members, evictions and overflows, and for a breaker group or a group of
// hedge delays the top Config.KeyedTopN keys (default 10) plus
// key="other" (stormguard.breaker.open_keys, stormguard.hedges.key_delay)
// and the delay over every key (stormguard.hedges.group_delay{stat});
// Config.KeyedAllKeys gives every key its point. Attempt spans carry the
// call's key (AttrKey). WatchAdmission reports a server-side
// admission.Limiter (stormguard.admission.*).
//
// Operation names become attribute values on metrics, so they must come
// from the program, not from requests; Config.MaxOperations caps them.
//
// Use this module when the program already exports through OpenTelemetry;
// use the promretry module for a plain Prometheus /metrics endpoint. Both
// can observe the same policy through retry.Multi.
package otelretry
