package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// setupTracing exports spans over OTLP/HTTP when the standard OpenTelemetry environment asks
// for it (OTEL_TRACES_EXPORTER=otlp, or an OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT); the
// exporter reads the rest of OTEL_* itself. Off by default. It returns the provider (nil
// when off: the gateway then makes no spans) and the function that flushes and stops the
// exporter at exit.
func setupTracing(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	exporter := os.Getenv("OTEL_TRACES_EXPORTER")
	if exporter == "none" || (exporter != "otlp" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" &&
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "") {
		return nil, noop, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, noop, fmt.Errorf("tracing: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win over the default name.
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("fencegate")), resource.Environment())
	if err != nil {
		res = resource.Environment()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, tp.Shutdown, nil
}
