package otel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	globalotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/retry"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/stormguard/stormguard/otel"

// Defaults used for zero Config fields.
const (
	// DefaultNamespace prefixes every metric name.
	DefaultNamespace = "stormguard"
	// DefaultMaxOperations bounds the number of distinct operation
	// attribute values one Observer creates.
	DefaultMaxOperations = 100
	// OverflowOperation is the operation attribute value that stands for
	// every operation seen after MaxOperations distinct names.
	OverflowOperation = "_other"
	// UnnamedOperation is the operation attribute value of a Policy whose
	// Operation is empty.
	UnnamedOperation = "unnamed"
)

// DefaultBuckets are the call duration histogram's bucket boundaries in
// seconds, the same as the prometheus module's.
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
	// 0: DefaultMaxOperations.
	MaxOperations int

	// ErrorAttributes, if set, adds attributes to the span of a failed
	// attempt, after the built-in ones (HTTP status, gRPC code). It is
	// called with the attempt's non-nil error.
	ErrorAttributes func(err error) []attribute.KeyValue
}

// Observer reports stormguard's calls to OpenTelemetry: one span per
// attempt, a child of the caller's span, so that every attempt of a call
// sits under one parent in one trace; and the same metrics as the
// prometheus module, through the OTel metric API (OpenTelemetry's
// Prometheus exporter gives them the same names: stormguard.attempts
// becomes stormguard_attempts_total, and so on).
//
// Set it as Policy.Observer (or combine it with retry.Multi). Attach
// budgets and breakers with WatchBudget and WatchBreaker. It is safe for
// concurrent use, and a nil *Observer does nothing.
type Observer struct {
	tracer    trace.Tracer
	maxOps    int
	errorAttr func(error) []attribute.KeyValue

	attempts        metric.Int64Counter
	calls           metric.Int64Counter
	duration        metric.Float64Histogram
	active          metric.Int64UpDownCounter
	budgetExhausted metric.Int64Counter
	transitions     metric.Int64Counter
	queueDropped    metric.Int64Counter
	queueDepth      metric.Int64Gauge

	ops atomic.Pointer[map[string]*opState]

	mu       sync.Mutex
	byLabel  map[string]*opState
	budgets  map[string]*budgetWatch
	breakers map[string]*breakerWatch
	queues   map[string]*queueState // queue name -> state
	qLabels  map[string]*queueState // label value -> state
}

// Number of retry.Outcome and retry.Reason values known to this package.
const (
	numOutcomes = int(retry.OutcomeCanceled) + 1
	numReasons  = int(retry.ReasonDeadline) + 1
)

// opState holds one operation's span name and pre-built attribute sets.
type opState struct {
	name       string // as the user gave it, for spans
	label      string // the operation attribute on metrics
	spanName   string
	opAttr     attribute.KeyValue
	firstStart []trace.SpanStartOption // span options of a first attempt

	// Option slices are built once: passing a fresh variadic slice to an
	// instrument (an interface) would allocate on every event.
	attempts [2][numOutcomes][]metric.AddOption
	calls    [numReasons][]metric.AddOption
	opAdd    []metric.AddOption    // {operation}
	opRecord []metric.RecordOption // {operation}
}

// New returns an Observer configured by cfg. It fails only if the meter
// refuses to create an instrument.
func New(cfg Config) (*Observer, error) {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = globalotel.GetTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = globalotel.GetMeterProvider()
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	buckets := cfg.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	o := &Observer{
		tracer:    tp.Tracer(ScopeName),
		maxOps:    cfg.MaxOperations,
		errorAttr: cfg.ErrorAttributes,
		byLabel:   make(map[string]*opState),
		budgets:   make(map[string]*budgetWatch),
		breakers:  make(map[string]*breakerWatch),
		queues:    make(map[string]*queueState),
		qLabels:   make(map[string]*queueState),
	}
	if o.maxOps <= 0 {
		o.maxOps = DefaultMaxOperations
	}
	empty := make(map[string]*opState)
	o.ops.Store(&empty)

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
		metric.WithDescription("Calls currently past their first attempt (running or waiting for a retry)."))
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
	o.queueDepth, err = m.Int64Gauge(name("queue.depth"), metric.WithUnit("{record}"),
		metric.WithDescription("Records waiting in a background retry queue."))
	add(err)
	_, err = m.Float64ObservableGauge(name("retry_budget.tokens"), metric.WithUnit("{token}"),
		metric.WithDescription("Retries the retry budget would grant now (tokens)."),
		metric.WithFloat64Callback(o.observeBudgets))
	add(err)
	_, err = m.Int64ObservableGauge(name("breaker.state"), metric.WithUnit("{state}"),
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."),
		metric.WithInt64Callback(o.observeBreakers))
	add(err)
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
	keyTo          = attribute.Key("to")
	keyQueue       = attribute.Key("queue")
)

// op returns the state of the named operation, creating it on first
// sight. The common case is one map read without locking.
func (o *Observer) op(name string) *opState {
	if s, ok := (*o.ops.Load())[name]; ok {
		return s
	}
	return o.addOp(name)
}

func (o *Observer) addOp(name string) *opState {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.ops.Load()
	if s, ok := old[name]; ok {
		return s
	}
	real := operationLabel(name) // valid UTF-8, "unnamed" for ""
	label := real
	shared := o.byLabel[label]
	if shared == nil && len(o.byLabel) >= o.maxOps {
		label = OverflowOperation
		shared = o.byLabel[label]
	}
	if shared == nil {
		shared = newOpState(label, label)
		o.byLabel[label] = shared
	}
	s := shared
	if real != label {
		// Past MaxOperations spans still carry the operation's name; its
		// metrics share the overflow label's attribute sets.
		s = &opState{label: label, attempts: shared.attempts, calls: shared.calls, opAdd: shared.opAdd, opRecord: shared.opRecord}
		s.setName(real)
	}
	if len(old) >= 4*o.maxOps {
		return s
	}
	next := make(map[string]*opState, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = s
	o.ops.Store(&next)
	return s
}

func newOpState(name, label string) *opState {
	s := &opState{label: label}
	s.setName(name)
	op := attribute.String(string(keyOperation), label)
	for k, kind := range []string{"first", "retry"} {
		for out := range numOutcomes {
			s.attempts[k][out] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op,
				keyAttemptKind.String(kind), keyOutcome.String(retry.Outcome(out).String())))}
		}
	}
	for r := range numReasons {
		s.calls[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, keyOutcome.String(retry.Reason(r).String())))}
	}
	opSet := metric.WithAttributeSet(attribute.NewSet(op))
	s.opAdd = []metric.AddOption{opSet}
	s.opRecord = []metric.RecordOption{opSet}
	return s
}

func (s *opState) setName(name string) {
	s.name = name
	s.spanName = "stormguard.attempt " + name
	s.opAttr = AttrOperation.String(name)
	s.firstStart = startOptions(s.opAttr, 1, 0)
}

// operationLabel turns a user's operation name into a valid attribute
// value for metrics.
func operationLabel(name string) string {
	if name == "" {
		return UnnamedOperation
	}
	if !utf8.ValidString(name) {
		return strings.ToValidUTF8(name, "\uFFFD")
	}
	return name
}

// AttemptStart starts the attempt's span as a child of the span in ctx and
// returns a context carrying it, and counts a call into retries_active
// when its second attempt starts.
func (o *Observer) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	if o == nil {
		return ctx
	}
	s := o.op(e.Operation)
	if e.Attempt == 2 {
		o.active.Add(ctx, 1, s.opAdd...)
	}
	return o.startSpan(ctx, s, e)
}

// AttemptEnd ends the attempt's span with its outcome and counts the
// attempt.
func (o *Observer) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	if o == nil {
		return
	}
	s := o.op(e.Operation)
	o.endSpan(ctx, e)
	kind := 0
	if e.Attempt > 1 {
		kind = 1
	}
	if int(e.Outcome) < numOutcomes {
		o.attempts.Add(ctx, 1, s.attempts[kind][e.Outcome]...)
		return
	}
	k := "first"
	if kind == 1 {
		k = "retry"
	}
	o.attempts.Add(ctx, 1, metric.WithAttributes(keyOperation.String(s.label),
		keyAttemptKind.String(k), keyOutcome.String(e.Outcome.String())))
}

// RetryScheduled adds a "stormguard.retry_scheduled" event to the
// caller's span, when it is recording.
func (o *Observer) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	if o == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		AttrOperation.String(e.Operation),
		AttrAttempt.Int(e.Attempt),
		AttrDelayMS.Float64(ms(e.Delay)),
		AttrAdvised.Bool(e.Advised),
	}
	if e.Err != nil {
		attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
	}
	span.AddEvent("stormguard.retry_scheduled", trace.WithAttributes(attrs...))
}

// CallEnd counts the call and its duration, takes it out of
// retries_active if it had retried, counts a budget refusal, and adds a
// "stormguard.gave_up" event to the caller's span when the call failed.
func (o *Observer) CallEnd(ctx context.Context, e retry.CallEnd) {
	if o == nil {
		return
	}
	s := o.op(e.Operation)
	if int(e.Reason) < numReasons {
		o.calls.Add(ctx, 1, s.calls[e.Reason]...)
	} else {
		o.calls.Add(ctx, 1, metric.WithAttributes(keyOperation.String(s.label), keyOutcome.String(e.Reason.String())))
	}
	o.duration.Record(ctx, e.Duration.Seconds(), s.opRecord...)
	if e.Attempts >= 2 {
		o.active.Add(ctx, -1, s.opAdd...)
	}
	if e.Reason == retry.ReasonBudget {
		o.budgetExhausted.Add(ctx, 1, s.opAdd...)
	}
	if e.Err != nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("stormguard.gave_up", trace.WithAttributes(
				AttrOperation.String(e.Operation),
				AttrReason.String(e.Reason.String()),
				attribute.Int("stormguard.attempts", e.Attempts),
				attribute.String("error.message", e.Err.Error()),
			))
		}
	}
}

var _ retry.Observer = (*Observer)(nil)
