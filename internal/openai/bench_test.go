package openai

import (
	"fmt"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
)

// conversationBody is a request of at most size bytes shaped like a long agent
// conversation (fencegate bench --prompt-bytes): long turns of text, tool calls and
// their results.
func conversationBody(ep Endpoint, size int) []byte {
	api := map[Endpoint]bench.API{Chat: bench.Chat, Completions: bench.Completions, Messages: bench.Messages, Responses: bench.Responses}[ep]
	o := bench.Options{API: api, Model: "m", Prompt: "Go on.", MaxTokens: 64, PromptBytes: size, StreamUsage: true, IgnoreEOS: true}
	return o.Body()
}

// The request intake, before (encoding/json, reference_test.go) and now (one pass), on
// conversation-shaped bodies. ms/MiB is the time per MiB of body, the figure the
// first token pays.
//
//	go test -run '^$' -bench Parse -benchtime 5x ./internal/openai/
func BenchmarkParse(b *testing.B) {
	for _, ep := range []Endpoint{Chat, Messages, Responses} {
		for _, size := range []int{64 << 10, 1 << 20, 4 << 20, 32 << 20} {
			body := conversationBody(ep, size)
			for _, impl := range []struct {
				name  string
				parse func() *Error
			}{
				{"encoding-json", func() *Error { _, e := refParseRequest(ep, body); return e }},
				{"one-pass", func() *Error { _, _, e := Parse(ep, body, 512); return e }},
			} {
				b.Run(fmt.Sprintf("%v/%dKiB/%s", ep, size>>10, impl.name), func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if e := impl.parse(); e != nil {
							b.Fatal(e)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6/(float64(len(body))/(1<<20)), "ms/MiB")
				})
			}
		}
	}
}
