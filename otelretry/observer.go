package otelretry

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/internal/labels"
	"github.com/stormguard/stormguard/retry"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/stormguard/stormguard/otelretry"

// Defaults used for zero Config fields.
const (
	// DefaultNamespace prefixes every metric name.
	DefaultNamespace = "stormguard"
	// DefaultMaxOperations bounds the number of distinct operation
	// attribute values one Observer creates.
	DefaultMaxOperations = 100
	// OverflowOperation is the operation attribute value that stands for
	// every operation seen after MaxOperations distinct names.
	OverflowOperation = labels.Overflow
	// UnnamedOperation is the operation attribute value of a Policy whose
	// Operation is empty.
	UnnamedOperation = labels.Unnamed
)

// DefaultBuckets are the call duration histogram's bucket boundaries in
// seconds, the same as the promretry module's.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Config configures an Observer. Its zero value uses the global providers.
type Config struct {
	// TracerProvider makes the attempt spans. nil: the global provider
	// (go.opentelemetry.io/otel.GetTracerProvider).
	TracerProvider trace.TracerProvider

	// MeterProvider makes the metrics. nil: the global provider.
	MeterProvider metric.MeterProvider

	// Namespace prefixes every metric name ("<namespace>.attempts").
	// "": DefaultNamespace.
	Namespace string

	// Buckets are the call duration histogram's bucket boundaries, in
	// seconds. nil: DefaultBuckets.
	Buckets []float64

	// MaxOperations bounds the number of distinct operation attribute
	// values on metrics; past it new operations are counted under
	// OverflowOperation. Spans carry the operation name even past it.
	// Queue attribute values are bounded by the same number, separately.
	// 0: DefaultMaxOperations.
	MaxOperations int

	// ErrorAttributes, if set, adds attributes to the span of a failed
	// attempt, after the built-in ones (HTTP status, gRPC code). It is
	// called with the attempt's non-nil error.
	ErrorAttributes func(err error) []attribute.KeyValue

	// KeyedTopN is how many keys of a watched breaker group get a data
	// point of their own in stormguard.breaker.open_keys (WatchKeyed),
	// the others summed under key="other", and how many keys of a watched
	// group of hedge delays get one in stormguard.hedges.key_delay, the
	// others' median under key="other". 0: DefaultKeyedTopN (10);
	// negative: none, only "other".
	KeyedTopN int
	// KeyedAllKeys gives every live key of a watched breaker group (and
	// every key of a group of hedge delays that gives a delay) its data
	// point, whatever KeyedTopN: as many as the group's MaxKeys. Only
	// when asked for. The metric SDK caps the points of one instrument
	// at its cardinality limit (2,000 by default; the rest are merged
	// into one point with otel.metric.overflow=true): raise it
	// (sdkmetric.WithCardinalityLimit) above the groups' MaxKeys.
	KeyedAllKeys bool
}

// Observer reports stormguard's calls to OpenTelemetry: one span per
// attempt, a child of the caller's span, so that every attempt of a call
// sits under one parent in one trace; and the same metrics as the
// promretry module, through the OTel metric API (OpenTelemetry's
// Prometheus exporter gives them the same names: stormguard.attempts
// becomes stormguard_attempts_total, and so on).
//
// Set it as Policy.Observer (or combine it with retry.Multi). Attach
// budgets, breakers and limiters with WatchBudget, WatchBreaker and
// WatchLimiter. It is safe for
// concurrent use, and a nil *Observer does nothing.
type Observer struct {
	tracer    trace.Tracer
	errorAttr func(error) []attribute.KeyValue

	attempts        metric.Int64Counter
	calls           metric.Int64Counter
	duration        metric.Float64Histogram
	active          metric.Int64UpDownCounter
	budgetExhausted metric.Int64Counter
	transitions     metric.Int64Counter
	queueDropped    metric.Int64Counter
	queueRefused    metric.Int64Counter
	queueDepth      metric.Int64Gauge
	configReloads   metric.Int64Counter
	hedges          metric.Int64Counter
	hedgesRefused   metric.Int64Counter

	ops    *labels.Table[*opState]    // operation name -> state
	queues *labels.Table[*queueState] // queue name -> state

	mu            sync.Mutex
	seq           uint64 // counts watches, to order them
	budgets       map[string]*budgetWatch
	breakers      map[string]*breakerWatch  // by operation name
	breakerParts  map[any]*breakerPart      // one per breaker, however many operations share it
	limiters      map[string]*limiterWatch  // by operation name
	limiterTotals map[string]*limiterTotals // counts of limiters no longer watched, by label
	limiterWidest map[any]widest            // the label each shared limiter had when the most operations shared it
	labelOpts     map[string][]metric.ObserveOption
	limiterInst   limiterInstruments
	keyedInst     keyedInstruments // keyed.go
	keyedTopN     int
	keyedAll      bool
	configVersion []metric.ObserveOption // {version} of the policy file in force; nil before one

	hedgeSpans sync.Map     // trace.Span -> struct{}: spans of hedges running (HedgeStarted to AttemptEnd)
	hedgeWatch hedgeWatches // hedge.go
	// admissionWatch holds the server-side admission Limiters watched.
	admissionWatch admissionWatches // admission.go
}

// Number of retry.Outcome and retry.Reason values known to this package.
// Values past them (from a newer core) are counted under "unknown".
const (
	numOutcomes = int(retry.OutcomeCanceled) + 1
	numReasons  = int(retry.ReasonThrottled) + 1
	unknown     = "unknown"
)

// opState holds one operation's span name and pre-built attribute sets.
type opState struct {
	label      string                  // the operation attribute on metrics
	spanName   string                  // of attempt spans
	callName   string                  // of call spans (StartCall)
	opAttr     attribute.KeyValue      // the operation attribute on spans
	firstStart []trace.SpanStartOption // span options of a first attempt

	// Option slices are built once: passing a fresh variadic slice to an
	// instrument (an interface) would allocate on every event. The last
	// outcome and reason are "unknown".
	attempts [2][numOutcomes + 1][]metric.AddOption
	calls    [numReasons + 1][]metric.AddOption
	opAdd    []metric.AddOption    // {operation}
	opRecord []metric.RecordOption // {operation}
	hedge    hedgeOptions
}

// New returns an Observer configured by cfg. It fails only if the meter
// refuses to create an instrument.
func New(cfg Config) (*Observer, error) {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	buckets := cfg.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	maxOps := cfg.MaxOperations
	if maxOps <= 0 {
		maxOps = DefaultMaxOperations
	}
	o := &Observer{
		tracer:    tp.Tracer(ScopeName),
		errorAttr: cfg.ErrorAttributes,
		// Past MaxOperations spans still carry the operation's name; its
		// metrics share the overflow label's attribute sets.
		ops: labels.New(maxOps, newOpState, func(name string, shared *opState) *opState {
			s := *shared
			s.setName(name)
			return &s
		}),
		queues:        labels.New(maxOps, newQueueState, nil),
		budgets:       make(map[string]*budgetWatch),
		breakers:      make(map[string]*breakerWatch),
		breakerParts:  make(map[any]*breakerPart),
		limiters:      make(map[string]*limiterWatch),
		limiterTotals: make(map[string]*limiterTotals),
		limiterWidest: make(map[any]widest),
		labelOpts:     make(map[string][]metric.ObserveOption),
	}

	m := mp.Meter(ScopeName)
	name := func(s string) string { return ns + "." + s }
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	o.attempts, err = m.Int64Counter(name("attempts"), metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by stormguard calls, by kind (first or retry) and outcome."))
	add(err)
	o.calls, err = m.Int64Counter(name("calls"), metric.WithUnit("{call}"),
		metric.WithDescription("Calls that returned, by outcome: success or the reason the call gave up."))
	add(err)
	o.duration, err = m.Float64Histogram(name("call.duration"), metric.WithUnit("s"),
		metric.WithDescription("Duration of whole calls, every attempt and wait included."),
		metric.WithExplicitBucketBoundaries(buckets...))
	add(err)
	o.active, err = m.Int64UpDownCounter(name("retries.active"), metric.WithUnit("{call}"),
		metric.WithDescription("Calls whose first attempt ended and that have not returned: waiting for a retry, running one, deciding to give up, or (hedged) waiting for cancelled copies."))
	add(err)
	o.budgetExhausted, err = m.Int64Counter(name("retry_budget.exhausted"), metric.WithUnit("{call}"),
		metric.WithDescription("Calls that stopped because the retry budget refused a retry."))
	add(err)
	o.transitions, err = m.Int64Counter(name("breaker.transitions"), metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes, by previous and new state."))
	add(err)
	o.queueDropped, err = m.Int64Counter(name("queue.dropped_records"), metric.WithUnit("{record}"),
		metric.WithDescription("Records a background retry queue dropped."))
	add(err)
	o.queueRefused, err = m.Int64Counter(name("queue.refused"), metric.WithUnit("{task}"),
		metric.WithDescription("Tasks a background retry Scheduler refused because it had MaxPending tasks; the caller kept them."))
	add(err)
	o.queueDepth, err = m.Int64Gauge(name("queue.depth"), metric.WithUnit("{record}"),
		metric.WithDescription("Records waiting in a background retry queue."))
	add(err)
	_, err = m.Float64ObservableGauge(name("retry_budget.tokens"), metric.WithUnit("{token}"),
		metric.WithDescription("Retries the retry budget would grant now (tokens)."),
		metric.WithFloat64Callback(o.observeBudgets))
	add(err)
	_, err = m.Int64ObservableGauge(name("breaker.state"), metric.WithUnit("{state}"),
		metric.WithDescription("Circuit breaker state, as a StateSet: 1 for the current state (closed, half-open or open), 0 for the others."),
		metric.WithInt64Callback(o.observeBreakers))
	add(err)
	_, err = m.Int64ObservableGauge(name("breaker.info"),
		metric.WithDescription("1 for each operation and the operation value its circuit breaker's transitions are counted under: the operation's own, or for a breaker several operations share "+SharedPrefix+" and their names; join on it."),
		metric.WithInt64Callback(o.observeBreakerInfo))
	add(err)
	o.configReloads, err = m.Int64Counter(name("config.reloads"), metric.WithUnit("{reload}"),
		metric.WithDescription("Policy files applied (result=\"success\") or rejected (result=\"failure\", the old policies serving on), and file watcher errors (result=\"watch_error\", a reload from disk follows)."))
	add(err)
	_, err = m.Int64ObservableGauge(name("config.info"),
		metric.WithDescription("1 for the version (content hash) of the policy file in force; join on it to split metrics by policy version."),
		metric.WithInt64Callback(o.observeConfig))
	add(err)
	o.hedges, err = m.Int64Counter(name("hedges"), metric.WithUnit("{attempt}"),
		metric.WithDescription("Hedged attempts: sent because no attempt answered within the hedge delay (started), that gave the call's result (won), cancelled because another attempt answered first (hedge_cancelled), and the attempts they hedged cancelled because a hedge answered first (first_cancelled)."))
	add(err)
	o.hedgesRefused, err = m.Int64Counter(name("hedges.refused"), metric.WithUnit("{hedge}"),
		metric.WithDescription("Hedges that were due but not sent, by reason (budget, breaker, attempts, deadline, nested, throttled); the attempts in flight went on."))
	add(err)
	o.newLimiterInstruments(m, name, add)
	o.newKeyedInstruments(m, name, add)
	o.keyedTopN, o.keyedAll = max(cfg.KeyedTopN, 0), cfg.KeyedAllKeys
	if cfg.KeyedTopN == 0 {
		o.keyedTopN = DefaultKeyedTopN
	}
	o.newHedgeInstruments(m, name, add)
	o.newAdmissionInstruments(m, name, add)
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("otel: creating instruments"), err)
	}
	return o, nil
}

// Attribute keys on metrics (the same label names as the prometheus
// module).
const (
	keyOperation   = attribute.Key("operation")
	keyAttemptKind = attribute.Key("attempt_kind")
	keyOutcome     = attribute.Key("outcome")
	keyFrom        = attribute.Key("from")
	keyLimiter     = attribute.Key("limiter")
	keyBreaker     = attribute.Key("breaker")
	keyTo          = attribute.Key("to")
	keyQueue       = attribute.Key("queue")
)

// newOpState returns the state of an operation whose spans and metrics
// carry label.
func newOpState(label string) *opState {
	s := &opState{label: label}
	s.setName(label)
	op := keyOperation.String(label)
	for k, kind := range []string{"first", "retry"} {
		for out := range numOutcomes + 1 {
			outcome := unknown
			if out < numOutcomes {
				outcome = retry.Outcome(out).String()
			}
			s.attempts[k][out] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op,
				keyAttemptKind.String(kind), keyOutcome.String(outcome)))}
		}
	}
	for r := range numReasons + 1 {
		reason := unknown
		if r < numReasons {
			reason = retry.Reason(r).String()
		}
		s.calls[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, keyOutcome.String(reason)))}
	}
	opSet := metric.WithAttributeSet(attribute.NewSet(op))
	s.opAdd = []metric.AddOption{opSet}
	s.opRecord = []metric.RecordOption{opSet}
	s.hedge = newHedgeOptions(op)
	return s
}

// setName sets the operation name spans carry.
func (s *opState) setName(name string) {
	s.spanName = "stormguard.attempt " + name
	s.callName = "stormguard.call " + name
	s.opAttr = AttrOperation.String(name)
	s.firstStart = startOptions(s.opAttr, 1, 0)
}

// AttemptStart starts the attempt's span as a child of the span in ctx and
// returns a context carrying it.
func (o *Observer) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	if o == nil {
		return ctx
	}
	return o.startSpan(ctx, o.ops.Get(e.Operation), e)
}

// AttemptEnd ends the attempt's span with its outcome and counts the
// attempt. A call is counted into retries.active when its first attempt
// ends (whatever the outcome), until CallEnd takes it out: a call whose
// first attempt failed is counted while it decides to retry, waits for a
// retry (backoff, Retry-After) or runs one.
func (o *Observer) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	if o == nil {
		return
	}
	o.endSpan(ctx, e)
	kind := 0
	if e.Attempt > 1 {
		kind = 1
	}
	s := o.ops.Get(e.Operation)
	o.attempts.Add(ctx, 1, s.attempts[kind][min(int(e.Outcome), numOutcomes)]...)
	if e.Attempt == 1 {
		o.active.Add(ctx, 1, s.opAdd...)
	}
}

// RetryScheduled adds a "stormguard.retry_scheduled" event to the
// caller's span, when it is recording: the attempt that will follow, the
// wait, whether the server advised it, and the error.type of the failure.
func (o *Observer) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	if o == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		o.ops.Get(e.Operation).opAttr,
		AttrAttempt.Int(e.Attempt),
		AttrDelayMS.Float64(ms(e.Delay)),
		AttrAdvised.Bool(e.Advised),
	}
	if e.Err != nil {
		attrs = append(attrs, AttrErrorType.String(ErrorType(e.Err)))
	}
	span.AddEvent("stormguard.retry_scheduled", trace.WithAttributes(attrs...))
}

// CallEnd counts the call and its duration, takes it out of
// retries.active if its first attempt had ended, counts a budget refusal,
// and adds a "stormguard.gave_up" event to the caller's span when the call
// failed: the reason as stormguard.outcome, the attempts made, and the
// error.type of the last attempt's error (none when no attempt ran). It
// ends the call span StartCall started, if any.
func (o *Observer) CallEnd(ctx context.Context, e retry.CallEnd) {
	if o == nil {
		return
	}
	s := o.ops.Get(e.Operation)
	o.calls.Add(ctx, 1, s.calls[min(int(e.Reason), numReasons)]...)
	o.duration.Record(ctx, e.Duration.Seconds(), s.opRecord...)
	if firstEnded(e) {
		o.active.Add(ctx, -1, s.opAdd...)
	}
	if e.Reason == retry.ReasonBudget {
		o.budgetExhausted.Add(ctx, 1, s.opAdd...)
	}
	if e.Err != nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			attrs := []attribute.KeyValue{
				s.opAttr,
				AttrOutcome.String(e.Reason.String()),
				AttrAttempts.Int(e.Attempts),
			}
			if last := lastError(e.Err); last != nil {
				attrs = append(attrs, AttrErrorType.String(ErrorType(last)))
			}
			span.AddEvent("stormguard.gave_up", trace.WithAttributes(attrs...))
		}
	}
	o.endCall(ctx, e)
}

var _ retry.Observer = (*Observer)(nil)

// firstEnded reports whether the call that e ends had its first attempt
// ended, that is whether AttemptEnd counted it into retries.active: it
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

// lastError returns the last attempt's error of a call's final error (a
// *retry.Error), or nil when no attempt failed.
func lastError(err error) error {
	var re *retry.Error
	if errors.As(err, &re) {
		return re.Last
	}
	return err
}
