package llamatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RecordEnv names the directory TestRecordFixtures writes llama-server's answers into
// (internal/sim/testdata/llamacpp). Unset, the test is skipped: recording is done by hand
// when the engine's version changes, and the fixtures are committed.
const RecordEnv = "FENCEGATE_LLAMACPP_RECORD"

// fixture is one request to record: the file it goes to, and what to send.
type fixture struct {
	file, path, body string
}

// recordFixtures are the requests whose answers internal/sim's tests compare with the
// simulator: every API the gateway serves, streamed and whole, and the errors llama-server
// gives for input it refuses. Prompts are short and max_tokens small, so the files are.
var recordFixtures = []fixture{
	{"chat.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"messages":[{"role":"user","content":"hello"}]}`},
	{"chat_stream.sse", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	{"chat_stream_usage.sse", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`},
	{"chat_n2.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":2,"n":2,"messages":[{"role":"user","content":"hello"}]}`},
	{"chat_stream_n2.sse", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":2,"n":2,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	{"completions.json", "/v1/completions", `{"model":"tiny-llama","max_tokens":3,"prompt":"hello"}`},
	{"completions_stream.sse", "/v1/completions", `{"model":"tiny-llama","max_tokens":3,"stream":true,"prompt":"hello"}`},
	{"completions_stream_2prompts.sse", "/v1/completions", `{"model":"tiny-llama","max_tokens":2,"stream":true,"prompt":["hello","world"]}`},
	{"messages.json", "/v1/messages", `{"model":"tiny-llama","max_tokens":3,"messages":[{"role":"user","content":"hello"}]}`},
	{"messages_stream.sse", "/v1/messages", `{"model":"tiny-llama","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	{"responses.json", "/v1/responses", `{"model":"tiny-llama","max_output_tokens":3,"input":"hello"}`},
	{"responses_stream.sse", "/v1/responses", `{"model":"tiny-llama","max_output_tokens":3,"stream":true,"input":"hello"}`},
	{"context_error.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"messages":[{"role":"user","content":"` + strings.Repeat("long ", 120) + `"}]}`},
	{"context_error_stream.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("long ", 120) + `"}]}`},
	{"messages_context_error.json", "/v1/messages", `{"model":"tiny-llama","max_tokens":3,"messages":[{"role":"user","content":"` + strings.Repeat("long ", 120) + `"}]}`},
	{"responses_context_error.json", "/v1/responses", `{"model":"tiny-llama","max_output_tokens":3,"input":"` + strings.Repeat("long ", 120) + `"}`},
	{"bad_param_error.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"seed":"x","messages":[{"role":"user","content":"hello"}]}`},
	{"n_error.json", "/v1/chat/completions", `{"model":"tiny-llama","max_tokens":3,"n":3,"messages":[{"role":"user","content":"hello"}]}`},
	{"responses_previous_id_error.json", "/v1/responses", `{"model":"tiny-llama","max_output_tokens":3,"input":"hello","previous_response_id":"resp_0123"}`},
}

// TestRecordFixtures records llama-server's answers to recordFixtures: a .json file holds
// a whole body; a .sse file holds a stream exactly as sent, after an SSE comment line
// naming the request. requests.txt lists, one line and tab-separated fields per file, the
// status and content type of the answer and the request that produced it.
func TestRecordFixtures(t *testing.T) {
	dir := os.Getenv(RecordEnv)
	if dir == "" {
		t.Skipf("%s is not set", RecordEnv)
	}
	// A small context, so that a prompt of a few hundred bytes overflows it.
	s := Start(t, 1, Options{Seed: 1, CtxPerSlot: 512})[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A connection per request: llama-server closes a connection after a stream while
	// offering keep-alive, and a request on it would fail.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var status strings.Builder
	for _, f := range recordFixtures {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+f.path, strings.NewReader(f.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if strings.HasSuffix(f.file, ".sse") {
			fmt.Fprintf(&out, ": POST %s %s\n\n", f.path, f.body)
		}
		out.Write(body)
		if !bytes.HasSuffix(body, []byte("\n")) {
			out.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&status, "%s\t%d\t%s\tPOST %s\t%s\n", f.file, resp.StatusCode, resp.Header.Get("Content-Type"), f.path, f.body)
	}
	if err := os.WriteFile(filepath.Join(dir, "requests.txt"), []byte(status.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
