package otelretry

import (
	"context"
	"errors"
	"go/token"
	"reflect"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// Attributes of attempt spans and span events. The stormguard ones are
// the metric attributes with a "stormguard." prefix wherever a span and a
// metric say the same thing, with the same values: stormguard.operation is
// the operation attribute of the metrics (the same cleaned name, though
// spans keep it past Config.MaxOperations), stormguard.attempt_kind and
// stormguard.outcome on an attempt span are the attempt_kind and outcome
// of its stormguard.attempts point, and stormguard.outcome on a gave_up
// event is the outcome of the call's stormguard.calls point. The others
// follow the semantic conventions of the OpenTelemetry version this module
// requires (semconv v1.43.0).
const (
	// AttrOperation is Policy.Operation, cleaned as on metrics.
	AttrOperation = attribute.Key("stormguard.operation")
	// AttrAttempt is the attempt number, 1 for the first.
	AttrAttempt = attribute.Key("stormguard.attempt")
	// AttrAttemptKind is "first" for the first attempt, "retry" for the
	// others.
	AttrAttemptKind = attribute.Key("stormguard.attempt_kind")
	// AttrDelayMS is the wait before the attempt (or the scheduled wait, on
	// a retry_scheduled event), in milliseconds.
	AttrDelayMS = attribute.Key("stormguard.delay_ms")
	// AttrOutcome is, on an attempt span, the attempt's retry.Outcome
	// (success, error, permanent_error, timeout, canceled); on a gave_up
	// event, the retry.Reason the call gave up for (attempts, budget,
	// breaker, permanent, context, deadline, panic, advice, nested,
	// overloaded, throttled).
	AttrOutcome = attribute.Key("stormguard.outcome")
	// AttrAttempts is, on a gave_up event, the number of attempts the
	// call made.
	AttrAttempts = attribute.Key("stormguard.attempts")
	// AttrAdvised tells, on a retry_scheduled event, that the server set
	// the delay (Retry-After, gRPC pushback).
	AttrAdvised = attribute.Key("stormguard.advised")
	// AttrHTTPStatusCode is the semantic convention
	// http.response.status_code: the HTTP status of a failed attempt.
	AttrHTTPStatusCode = semconv.HTTPResponseStatusCodeKey
	// AttrRPCStatusCode is the semantic convention
	// rpc.response.status_code: the gRPC status code of a failed attempt,
	// by name ("UNAVAILABLE"), as the conventions give it for gRPC.
	AttrRPCStatusCode = semconv.RPCResponseStatusCodeKey
	// AttrErrorType is the semantic convention error.type, set on failed
	// attempts and on retry_scheduled and gave_up events; see ErrorType
	// for its values.
	AttrErrorType = semconv.ErrorTypeKey
)

// spanKey finds, in the context returned by AttemptStart, the span this
// Observer started: not whatever span is current, which another observer
// or the operation may have replaced.
type spanKey struct{ o *Observer }

func (o *Observer) startSpan(ctx context.Context, s *opState, e retry.AttemptStart) context.Context {
	opts := s.firstStart // the common case, built once
	if e.Attempt != 1 || e.Delay != 0 {
		opts = startOptions(s.opAttr, e.Attempt, e.Delay)
	}
	ctx, span := o.tracer.Start(ctx, s.spanName, opts...)
	if !span.IsRecording() {
		return ctx // nothing to end: the span context still propagates
	}
	if key, ok := keyed.Lookup(ctx); ok {
		span.SetAttributes(AttrKey.String(key))
	}
	return context.WithValue(ctx, spanKey{o}, span)
}

func startOptions(op attribute.KeyValue, attempt int, delay time.Duration) []trace.SpanStartOption {
	kind := kindFirst
	if attempt > 1 {
		kind = kindRetry
	}
	return []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(op, AttrAttempt.Int(attempt), kind, AttrDelayMS.Float64(ms(delay))),
	}
}

// The attempt_kind values, on spans.
var (
	kindFirst = AttrAttemptKind.String("first")
	kindRetry = AttrAttemptKind.String("retry")
)

func (o *Observer) endSpan(ctx context.Context, e retry.AttemptEnd) {
	span, _ := ctx.Value(spanKey{o}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(e.Outcome.String()))
	lost := o.hedgeEnd(span, e)
	if e.Err != nil {
		if code, ok := HTTPStatusCode(e.Err); ok {
			span.SetAttributes(AttrHTTPStatusCode.Int(code))
		}
		if code, ok := GRPCStatusCode(e.Err); ok {
			span.SetAttributes(AttrRPCStatusCode.String(GRPCCodeName(code)))
		}
		span.SetAttributes(AttrErrorType.String(errorType(e.Err, e.Outcome)))
		if o.errorAttr != nil {
			span.SetAttributes(o.errorAttr(e.Err)...)
		}
		if !lost {
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End()
}

// HTTPStatusCode returns the HTTP status carried by err: an
// *httpretry.StatusError, or any error in the chain with a
// StatusCode() int method.
func HTTPStatusCode(err error) (int, bool) {
	var se *httpretry.StatusError
	if errors.As(err, &se) {
		return se.StatusCode, true
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		return sc.StatusCode(), true
	}
	return 0, false
}

// GRPCStatusCode returns the gRPC status code carried by err: the first
// error in the chain with a GRPCStatus method, as the errors of
// google.golang.org/grpc/status have, whose result has a Code method
// returning an integer (codes.Code). It finds them by their method names,
// so that this module does not depend on gRPC.
func GRPCStatusCode(err error) (int64, bool) {
	// Walk the error tree (Unwrap() error and Unwrap() []error), bounded
	// against cycles.
	stack := []error{err}
	for seen := 0; len(stack) > 0 && seen < 64; seen++ {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e == nil {
			continue
		}
		if code, ok := grpcCodeOf(e); ok {
			return code, true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			stack = append(stack, u.Unwrap())
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			for i := len(errs) - 1; i >= 0; i-- { // first child on top
				stack = append(stack, errs[i])
			}
		}
	}
	return 0, false
}

func grpcCodeOf(e error) (int64, bool) {
	m := reflect.ValueOf(e).MethodByName("GRPCStatus")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return 0, false
	}
	st := m.Call(nil)[0]
	switch st.Kind() {
	case reflect.Pointer, reflect.Interface:
		if st.IsNil() {
			return 0, false
		}
	}
	c := st.MethodByName("Code")
	if !c.IsValid() || c.Type().NumIn() != 0 || c.Type().NumOut() != 1 {
		return 0, false
	}
	v := c.Call(nil)[0]
	switch {
	case v.CanUint():
		return int64(v.Uint()), true
	case v.CanInt():
		return v.Int(), true
	}
	return 0, false
}

// ErrorType returns the error.type of a failed attempt's error, from the
// most specific to the most general: the gRPC status code name
// ("UNAVAILABLE"), the HTTP status code ("503"), the result of an
// ErrorType() string method in the chain, then the Go type of the error
// (as semconv.ErrorType gives it, "*net.OpError"), looking through
// stormguard's own wrappers (retry.Permanent, retry.After, the attempt
// timeout marker) and fmt.Errorf's. An attempt cut by AttemptTimeout has
// "timeout", as the conventions suggest. It returns "" for a nil error.
func ErrorType(err error) string { return errorType(err, retry.OutcomeError) }

func errorType(err error, outcome retry.Outcome) string {
	if err == nil {
		return ""
	}
	if code, ok := GRPCStatusCode(err); ok {
		return GRPCCodeName(code)
	}
	if code, ok := HTTPStatusCode(err); ok {
		return strconv.Itoa(code)
	}
	if outcome == retry.OutcomeTimeout {
		return "timeout"
	}
	return semconv.ErrorType(unwrapMarkers(err)).Value.AsString()
}

// retryPkg is the package path of stormguard's retry package, whose
// unexported error types only mark an error (permanent, advice, timeout).
var retryPkg = reflect.TypeFor[retry.Error]().PkgPath()

// unwrapMarkers looks through the retry package's marker wrappers.
func unwrapMarkers(err error) error {
	for range 16 {
		t := reflect.TypeOf(err)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok || t.PkgPath() != retryPkg || t.Name() == "" || token.IsExported(t.Name()) || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
	return err
}

// grpcCodeNames are the names of gRPC's status codes, as
// rpc.response.status_code gives them.
var grpcCodeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// GRPCCodeName returns the name of a gRPC status code ("UNAVAILABLE" for
// 14), or its decimal form for a code gRPC does not define.
func GRPCCodeName(code int64) string {
	if code >= 0 && code < int64(len(grpcCodeNames)) {
		return grpcCodeNames[code]
	}
	return strconv.FormatInt(code, 10)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
