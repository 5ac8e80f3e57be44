package otel

import (
	"context"
	"errors"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Attributes of attempt spans and span events.
const (
	// AttrOperation is Policy.Operation.
	AttrOperation = attribute.Key("stormguard.operation")
	// AttrAttempt is the attempt number, 1 for the first.
	AttrAttempt = attribute.Key("stormguard.attempt")
	// AttrDelayMS is the wait before the attempt (or the scheduled wait, on
	// a retry_scheduled event), in milliseconds.
	AttrDelayMS = attribute.Key("stormguard.delay_ms")
	// AttrOutcome is the attempt's retry.Outcome: success, error,
	// permanent_error, timeout or canceled.
	AttrOutcome = attribute.Key("stormguard.outcome")
	// AttrAdvised tells, on a retry_scheduled event, that the server set
	// the delay (Retry-After, gRPC pushback).
	AttrAdvised = attribute.Key("stormguard.advised")
	// AttrReason is the retry.Reason a call gave up for, on a gave_up
	// event.
	AttrReason = attribute.Key("stormguard.reason")
	// AttrHTTPStatusCode is the OpenTelemetry semantic convention for the
	// HTTP response status of a failed attempt.
	AttrHTTPStatusCode = attribute.Key("http.response.status_code")
	// AttrGRPCStatusCode is the OpenTelemetry semantic convention for the
	// gRPC status code of a failed attempt.
	AttrGRPCStatusCode = attribute.Key("rpc.grpc.status_code")
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
	return context.WithValue(ctx, spanKey{o}, span)
}

func startOptions(op attribute.KeyValue, attempt int, delay time.Duration) []trace.SpanStartOption {
	return []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(op, AttrAttempt.Int(attempt), AttrDelayMS.Float64(ms(delay))),
	}
}

func (o *Observer) endSpan(ctx context.Context, e retry.AttemptEnd) {
	span, _ := ctx.Value(spanKey{o}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(e.Outcome.String()))
	if e.Err != nil {
		if code, ok := HTTPStatusCode(e.Err); ok {
			span.SetAttributes(AttrHTTPStatusCode.Int(code))
		}
		if code, ok := GRPCStatusCode(e.Err); ok {
			span.SetAttributes(AttrGRPCStatusCode.Int64(code))
		}
		if o.errorAttr != nil {
			span.SetAttributes(o.errorAttr(e.Err)...)
		}
		span.SetStatus(codes.Error, e.Err.Error())
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
