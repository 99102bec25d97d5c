package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
)

// Tracing is off unless the OpenTelemetry environment asks for it; with an OTLP endpoint
// it installs a provider that exports there.
func TestSetupTracing(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	before := otel.GetTracerProvider()
	tp, stop, err := setupTracing(context.Background())
	if err != nil || tp != nil || otel.GetTracerProvider() != before {
		t.Fatalf("tracing set up without being asked: %v", err)
	}
	stop(context.Background())

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	tp, stop, err = setupTracing(context.Background())
	if err != nil || tp == nil || otel.GetTracerProvider() != tp {
		t.Fatalf("no provider with an endpoint set: %v", err)
	}
	otel.SetTracerProvider(before)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing listens there; shutting down must not hang
	stop(ctx)
}
