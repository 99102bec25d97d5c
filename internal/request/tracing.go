package request

import (
	"context"
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: one span per logical request (a server span, child of the client's W3C trace
// context when it sent one) and one per attempt (a client span whose context goes to the
// engine in traceparent). Without a tracer (tracing not configured) no span is made, not
// even a no-op one, and the client's trace context reaches the engines as it came, with
// the client's other headers.

// tracePropagator reads and writes W3C trace context and baggage.
var tracePropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// startRequestSpan starts the span of a logical request received as r.
func (rc *recorder) startRequestSpan(r *http.Request, req *openai.Request) {
	if rc.srv.Tracer() == nil {
		return
	}
	ctx := tracePropagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	rc.spanCtx, rc.span = rc.srv.Tracer().Start(ctx, "fencegate "+req.Endpoint.String(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("fencegate.request_id", rc.id), attribute.String("gen_ai.request.model", rc.model),
			attribute.String("fencegate.endpoint", req.Endpoint.String()), attribute.Bool("fencegate.stream", req.Stream)))
}

// endRequestSpan records how the request ended.
func (rc *recorder) endRequestSpan(outcome, errCode string, attempts, delivered int, committed bool) {
	if rc.span == nil {
		return
	}
	rc.span.SetAttributes(attribute.String("fencegate.outcome", outcome), attribute.Int("fencegate.attempts", attempts),
		attribute.Int("fencegate.delivered_output_tokens", delivered), attribute.Bool("fencegate.first_delta_sent", committed))
	if errCode != "" {
		rc.span.SetAttributes(attribute.String("fencegate.error_code", errCode))
		rc.span.SetStatus(codes.Error, errCode)
	}
	rc.span.End()
}

// startAttemptSpan starts an attempt's span and puts its context in the engine request.
func (rc *recorder) startAttemptSpan(a *Attempt, h http.Header) {
	if rc.spanCtx == nil {
		return
	}
	var ctx context.Context
	ctx, a.span = rc.srv.Tracer().Start(rc.spanCtx, "fencegate attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("fencegate.attempt_id", a.id), attribute.String("fencegate.replica", a.replica),
			attribute.Int64("fencegate.lease_epoch", int64(a.epoch)), attribute.Int("fencegate.attempt", a.n)))
	tracePropagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// endAttemptSpan records how an attempt ended.
func endAttemptSpan(a *Attempt, reason, failure string, cancelled bool) {
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
