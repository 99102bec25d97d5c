package protocol

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// An error answered before any output is in its API's shape, with its status, and tells
// the official SDKs not to send again what the gateway says is not retryable.
func TestWriteError(t *testing.T) {
	for _, p := range []sse.Protocol{sse.Completions, sse.Messages, sse.Responses} {
		for _, retryable := range []bool{false, true} {
			rec := httptest.NewRecorder()
			e := &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_unavailable", Message: "down", Retryable: &retryable}
			WriteError(rec, p, e)
			if rec.Code != 502 || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("protocol %v: status %d, content type %q", p, rec.Code, rec.Header().Get("Content-Type"))
			}
			want := "false"
			if retryable {
				want = "true"
			}
			if got := rec.Header().Get("X-Should-Retry"); got != want {
				t.Errorf("protocol %v, retryable %v: X-Should-Retry %q, want %q", p, retryable, got, want)
			}
			// The Anthropic SDKs read {"type":"error","error":{...}}, OpenAI's {"error":{...}}.
			prefix := `{"error":{`
			if p == sse.Messages {
				prefix = `{"type":"error","error":{`
			}
			if body := rec.Body.String(); !strings.HasPrefix(body, prefix) || !strings.Contains(body, `"upstream_unavailable"`) {
				t.Errorf("protocol %v: body %q", p, body)
			}
		}
	}
}
