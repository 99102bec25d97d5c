package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/logging"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/syncbuf"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// syncBuffer is a log sink safe for concurrent handlers, read back as JSON lines.
type syncBuffer struct{ syncbuf.Buffer }

func (s *syncBuffer) lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// One JSON access-log line per request with what an operator needs, and never the prompt
// or the answer: through slog's JSON handler, and through the buffered logger `fencegate
// serve` runs with, whose access lines are written by hand (logging.WriteJSONLine).
func TestAccessLog(t *testing.T) {
	t.Run("slog", func(t *testing.T) {
		var sink syncBuffer
		testAccessLog(t, &sink, slog.New(slog.NewJSONHandler(&sink, nil)), func() {})
	})
	t.Run("serve's", func(t *testing.T) {
		var sink syncBuffer
		l, flush, err := logging.NewBuffered(logging.JSON, &sink)
		if err != nil {
			t.Fatal(err)
		}
		testAccessLog(t, &sink, l, func() { flush() })
	})
}

func testAccessLog(t *testing.T, sink *syncBuffer, log *slog.Logger, flush func()) {
	s := startSim(t, sim.Config{Name: "sim-1"})
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: []config.Replica{{URL: s.URL(), Name: "sim-1"}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := h1servertest.NewServer(gw.Handler())
	defer func() { srv.Close(); gw.Close() }()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	s.ArmFault("crash@sent:1", 1)
	st := c.Chat.Completions.NewStreaming(testCtx(t), chatParams("a private prompt", 6))
	for st.Next() {
	}
	c.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "no-such-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	srv.Close() // handlers have returned
	flush()
	var requests []map[string]any
	for _, l := range sink.lines() {
		if l["msg"] == "request" {
			requests = append(requests, l)
		}
	}
	if len(requests) != 2 {
		t.Fatalf("access lines %v", requests)
	}
	cut, missing := requests[0], requests[1]
	if cut["model"] == nil {
		cut, missing = missing, cut
	}
	for k, want := range map[string]any{"path": "/v1/chat/completions", "status": float64(200), "model": "sim-model", "endpoint": "chat",
		"outcome": "interrupted", "attempts": float64(1), "replica": "sim-1", "delivered_output_tokens": float64(2),
		"error_code": "upstream_decode_interrupted"} {
		if cut[k] != want {
			t.Fatalf("%s = %v, want %v in %v", k, cut[k], want, cut)
		}
	}
	if cut["ttft_ms"] == nil || cut["duration_ms"] == nil || !strings.HasPrefix(cut["request_id"].(string), "req_") {
		t.Fatalf("line %v", cut)
	}
	if missing["status"] != float64(404) || missing["error_code"] != "model_not_found" {
		t.Fatalf("line %v", missing)
	}
	if strings.Contains(sink.String(), "private prompt") {
		t.Fatal("the log holds the prompt")
	}
}
