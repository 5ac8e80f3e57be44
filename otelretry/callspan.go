package otelretry

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/retry"
)

// callKey finds, in a call's context, the call span StartCall started.
type callKey struct{ o *Observer }

// StartCall gives a call without a span of its own one: when ctx carries
// no valid span (a background job, a queue consumer), it starts a span
// named "stormguard.call <operation>" and returns a context carrying it,
// so that the call made with that context (retry.Do, retry.Run or an
// adapter driving a retry.Call) has its attempt spans under one parent in
// one trace, rather than one root trace per attempt; the call's
// retry_scheduled and gave_up events go on it, and CallEnd ends it with
// the call's outcome (Error status when the call failed). When ctx already
// carries a span, StartCall returns ctx: the attempts go under the
// caller's span. Use the returned context for one call.
func (o *Observer) StartCall(ctx context.Context, operation string) context.Context {
	if o == nil || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	s := o.ops.Get(operation)
	ctx, span := o.tracer.Start(ctx, s.callName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(s.opAttr))
	if !span.IsRecording() {
		return ctx
	}
	return context.WithValue(ctx, callKey{o}, span)
}

// endCall ends the call span StartCall put in ctx, if any.
func (o *Observer) endCall(ctx context.Context, e retry.CallEnd) {
	span, _ := ctx.Value(callKey{o}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(e.Reason.String()), AttrAttempts.Int(e.Attempts))
	if e.Err != nil {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End()
}

// CallStart implements retry.CallStarter: every call observed by o that
// starts without a span gets one call span (see StartCall), so plain
// retry.Do calls from background code make one trace per call.
func (o *Observer) CallStart(ctx context.Context, e retry.CallStart) context.Context {
	return o.StartCall(ctx, e.Operation)
}
