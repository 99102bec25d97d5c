package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A rerun request's spans: one for the logical request, child of the client's trace
// context, and one per attempt under it, with the replica, the end reason and the first
// delta; each engine gets the trace context of its attempt.
func TestSpansOfARerunRequest(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	traced := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/chat/completions" {
				mu.Lock()
				seen = append(seen, r.Header.Get("Traceparent"))
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	s1 := startSim(t, sim.Config{Name: "sim-1"})
	s2 := startSim(t, sim.Config{Name: "sim-2"})
	if err := s1.ArmFault("crash@prefill", 1); err != nil {
		t.Fatal(err)
	}
	front1 := httptest.NewServer(traced(reverse(s1.URL())))
	front2 := httptest.NewServer(traced(reverse(s2.URL())))
	defer front1.Close()
	defer front2.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: []config.Replica{
		{URL: front1.URL, Name: "sim-1"}, {URL: front2.URL, Name: "sim-2", Priority: 1}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv := h1servertest.NewServer(gw.Handler())
	defer func() { srv.Close(); gw.Close() }()

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp, body := postAPI(t, srv.URL+"/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"trace me"}]}`,
		"Traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01")
	if resp.StatusCode != 200 || !strings.HasSuffix(string(body), "[DONE]\n\n") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	srv.Close() // the handler, and so its spans, have ended
	spans := exp.GetSpans()
	var request tracetest.SpanStub
	var attempts []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "fencegate chat":
			request = s
		case "fencegate attempt":
			attempts = append(attempts, s)
		}
	}
	if request.SpanContext.TraceID().String() != clientTrace || request.SpanKind != trace.SpanKindServer ||
		attr(request, "fencegate.outcome") != "completed" || attr(request, "fencegate.attempts") != "2" {
		t.Fatalf("request span %+v", request)
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans", len(attempts))
	}
	byReplica := map[string]tracetest.SpanStub{}
	for _, a := range attempts {
		if a.Parent.SpanID() != request.SpanContext.SpanID() {
			t.Fatalf("attempt span not under the request span: %+v", a)
		}
		byReplica[attr(a, "fencegate.replica")] = a
	}
	if first := byReplica["sim-1"]; attr(first, "fencegate.failure") != "dead" || len(first.Events) != 0 {
		t.Fatalf("first attempt %+v", first)
	}
	if second := byReplica["sim-2"]; attr(second, "fencegate.end_reason") != "completed" || len(second.Events) != 1 || second.Events[0].Name != "first_delta" {
		t.Fatalf("second attempt %+v", second)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("engines saw %v", seen)
	}
	for i, tp := range seen {
		// The engine sees the client's trace with its attempt's span as the parent.
		if !strings.HasPrefix(tp, "00-"+clientTrace+"-") || strings.Contains(tp, "00f067aa0ba902b7") {
			t.Fatalf("engine %d got traceparent %q", i, tp)
		}
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}

// reverse is a minimal forwarding handler to url (the test's own tap in front of a sim).
func reverse(url string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, url+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
		}
	})
}

// Without a tracer provider the gateway makes no spans, and the client's trace context
// (traceparent, tracestate, baggage) reaches the engine as the client sent it.
func TestTraceContextPassesThroughWithoutTracing(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	s := startSim(t, sim.Config{Name: "sim-1"})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
		}
		reverse(s.URL()).ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: []config.Replica{
		{URL: front.URL, Name: "sim-1"}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, srv := newGatewayServer(t, cfg)
	defer func() { srv.Close(); gw.Close() }()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp, body := postAPI(t, srv.URL+"/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"trace me"}]}`,
		"Traceparent", parent, "Tracestate", "vendor=x", "Baggage", "tenant=a")
	if resp.StatusCode != 200 || !strings.HasSuffix(string(body), "[DONE]\n\n") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the engine saw %d requests", len(seen))
	}
	h := seen[0]
	if h.Get("Traceparent") != parent || h.Get("Tracestate") != "vendor=x" || h.Get("Baggage") != "tenant=a" {
		t.Fatalf("the engine got traceparent %q, tracestate %q, baggage %q; want the client's", h.Get("Traceparent"), h.Get("Tracestate"), h.Get("Baggage"))
	}
}
