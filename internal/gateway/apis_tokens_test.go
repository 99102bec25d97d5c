package gateway_test

import (
	"net/http"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// A replica that sends several tokens per event (vLLM's --stream-interval): the deltas of a
// streamed Responses answer are fewer than its tokens, and response.completed's usage makes
// the journal's count exact.
func TestResponsesStreamTokensFromUsage(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 1, sim: func(_ int, c *sim.Config) { c.StreamInterval = 3 }})
	var resp *http.Response
	s := e.client.Responses.NewStreaming(testCtx(t), responses.ResponseNewParams{Model: "sim-model",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("count the tokens")},
		MaxOutputTokens: openai.Int(9)}, option.WithResponseInto(&resp))
	defer s.Close()
	deltas, usage := 0, int64(-1)
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			deltas++
		case "response.completed":
			usage = ev.Response.Usage.OutputTokens
		}
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if usage != 9 || deltas >= 9 {
		t.Fatalf("response.completed says %d output tokens in %d deltas; the test needs 9 in fewer", usage, deltas)
	}
	if rec := e.record(resp.Header.Get("X-Request-Id")); rec.Outcome != "completed" || rec.DeliveredOutputTokens != 9 {
		t.Fatalf("journal: outcome %s, %d delivered tokens, want 9 (response.completed's usage)", rec.Outcome, rec.DeliveredOutputTokens)
	}
}
