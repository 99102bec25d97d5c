package gateway

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: one span per logical request (a server span, child of the client's W3C trace
// context when it sent one) and one per attempt (a client span whose context goes to the
// engine in traceparent). With the default no-op provider nothing is recorded, but the
// client's trace context still reaches the engines.

// tracePropagator reads and writes W3C trace context and baggage.
var tracePropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

const tracerName = "github.com/fencegate/fencegate/internal/gateway"

// startRequestSpan starts the span of a logical request.
func (rn *run) startRequestSpan() {
	ctx := tracePropagator.Extract(rn.r.Context(), propagation.HeaderCarrier(rn.r.Header))
	rn.spanCtx, rn.span = rn.s.tracer.Start(ctx, "fencegate "+rn.req.Endpoint.String(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("fencegate.request_id", rn.id), attribute.String("gen_ai.request.model", rn.model),
			attribute.String("fencegate.endpoint", rn.req.Endpoint.String()), attribute.Bool("fencegate.stream", rn.req.Stream)))
}

// endRequestSpan records how the request ended.
func (rn *run) endRequestSpan(outcome, errCode string) {
	if rn.span == nil {
		return
	}
	rn.span.SetAttributes(attribute.String("fencegate.outcome", outcome), attribute.Int("fencegate.attempts", len(rn.attempts)),
		attribute.Int("fencegate.delivered_output_tokens", rn.m.Delivered()), attribute.Bool("fencegate.first_delta_sent", rn.m.Committed()))
	if errCode != "" {
		rn.span.SetAttributes(attribute.String("fencegate.error_code", errCode))
		rn.span.SetStatus(codes.Error, errCode)
	}
	rn.span.End()
}

// startAttemptSpan starts an attempt's span and puts its context in the engine request.
func (rn *run) startAttemptSpan(a *attempt, h http.Header) {
	var ctx context.Context
	ctx, a.span = rn.s.tracer.Start(rn.spanCtx, "fencegate attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("fencegate.attempt_id", a.id), attribute.String("fencegate.replica", a.replica),
			attribute.Int64("fencegate.lease_epoch", int64(a.epoch)), attribute.Int("fencegate.attempt", a.n)))
	tracePropagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// endAttemptSpan records how an attempt ended.
func endAttemptSpan(a *attempt, reason, failure string, cancelled bool) {
	if a.span == nil {
		return
	}
	a.span.SetAttributes(attribute.String("fencegate.end_reason", reason), attribute.Bool("fencegate.cancel_sent", cancelled))
	if failure != "" {
		a.span.SetAttributes(attribute.String("fencegate.failure", failure))
		a.span.SetStatus(codes.Error, reason)
	}
	a.span.End()
}
