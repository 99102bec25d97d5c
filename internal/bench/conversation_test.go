package bench_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
)

// --prompt-bytes makes every API's body a conversation of at most that many bytes and
// close to it, with tool calls among its turns, the same bytes on every call.
func TestPromptBytesBody(t *testing.T) {
	for _, api := range []bench.API{bench.Chat, bench.Completions, bench.Messages, bench.Responses} {
		for _, size := range []int{0, 200, 64 << 10, 1 << 20} {
			o := bench.Options{API: api, Model: "m", Prompt: "Go on.", MaxTokens: 8, PromptBytes: size, StreamUsage: true}
			b := o.Body()
			if !json.Valid(b) {
				t.Fatalf("%v %d: not JSON", api, size)
			}
			if !bytes.Equal(b, o.Body()) {
				t.Fatalf("%v %d: two calls gave different bodies", api, size)
			}
			if size < 1024 {
				if size > 0 && len(b) > size && !bytes.Contains(b, []byte(`"Go on."`)) {
					t.Fatalf("%v %d: %s", api, size, b)
				}
				continue
			}
			if len(b) > size || len(b) < size*9/10 {
				t.Errorf("%v %d: body of %d bytes", api, size, len(b))
			}
			tool := map[bench.API]string{bench.Chat: `"tool_calls"`, bench.Messages: `"tool_result"`, bench.Responses: `"function_call_output"`}[api]
			if !bytes.Contains(b, []byte(tool)) || !bytes.Contains(b, []byte(`Go on.`)) {
				t.Errorf("%v %d: no %s or no prompt", api, size, tool)
			}
		}
	}
}
