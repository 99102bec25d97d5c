package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// The default body limit is 32 MiB (Anthropic's): a long conversation of several MiB
// goes through; a body declared longer than the limit is refused before it is read,
// and its connection closed.
func TestDefaultBodyLimit(t *testing.T) {
	// An engine with a context window for it (as vLLM's --max-model-len).
	e := newEnv(t, envOptions{replicas: 1, sim: func(_ int, c *sim.Config) { c.MaxModelLen = 4 << 20 }})
	o := bench.Options{API: bench.Chat, Model: "sim-model", Prompt: "Go on.", MaxTokens: 2, PromptBytes: 5 << 20, StreamUsage: true}
	body := o.Body()
	resp := post(t, e.srv.URL+"/v1/chat/completions", string(body))
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte("data: [DONE]")) {
		t.Fatalf("a conversation of %d bytes: %d %.300s", len(body), resp.StatusCode, answer)
	}

	addr := strings.TrimPrefix(e.srv.URL, "http://")
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":",
		config.DefaultMaxBodyBytes+1)
	over, text := rawAnswer(t, addr, head)
	wantAPIError(t, "a body declared over the limit", "/v1/chat/completions", over.StatusCode, over.Header, text, http.StatusRequestEntityTooLarge, "request_too_large")
	if !over.Close {
		t.Error("the connection of a refused body stays open")
	}
}
