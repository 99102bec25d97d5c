package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeClassify decodes and classifies a typical vLLM chat stream
// (role chunk, 200 content chunks, finish, usage, [DONE]) delivered in reads
// of 4 KiB, and reports ns per event besides MB/s.
func BenchmarkDecodeClassify(b *testing.B) {
	var stream []byte
	stream = AppendData(stream, []byte(vllmRole))
	for range 200 {
		stream = AppendData(stream, []byte(vllmContent))
	}
	stream = AppendData(stream, []byte(vllmFinish))
	stream = AppendData(stream, []byte(vllmUsage))
	stream = append(stream, DoneEvent...)
	events := bytes.Count(stream, []byte("\n\n"))

	var d Decoder
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	b.ResetTimer()
	outputs := 0
	for b.Loop() {
		decodeReads(&d, stream, func(e Event) {
			if e.Class&Output != 0 {
				outputs++
			}
		})
	}
	if outputs != 200*b.N {
		b.Fatalf("saw %d output events, want %d", outputs, 200*b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkClassify measures the scanner alone on one content chunk.
func BenchmarkClassify(b *testing.B) {
	data := []byte(vllmContent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		Classify(data)
	}
}

// BenchmarkSummarize measures the scanner on a content chunk that carries the
// running usage (vLLM's continuous_usage_stats), the chunk the token count is
// read from.
func BenchmarkSummarize(b *testing.B) {
	data := []byte(vllmContentUsage)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		Summarize(data)
	}
}

// BenchmarkStripUsage measures removing that usage for a client that did not
// ask for it.
func BenchmarkStripUsage(b *testing.B) {
	data := []byte(vllmContentUsage)
	dst := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		dst = StripUsage(dst[:0], data)
	}
}

// BenchmarkDecodeUsageStream decodes the stream the gateway reads when it asks for
// continuous usage (vLLM's continuous_usage_stats): 200 content chunks, each with the
// running usage, in reads of 4 KiB.
func BenchmarkDecodeUsageStream(b *testing.B) {
	var stream []byte
	for range 200 {
		stream = AppendData(stream, []byte(vllmContentUsage))
	}
	var d Decoder
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		decodeReads(&d, stream, func(Event) {})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/event")
}

// BenchmarkDecodeClassifyEngines decodes a 200-token stream as each engine writes it, the
// text changing from chunk to chunk as it does (and vLLM's continuous usage counting up),
// in reads of 4 KiB: what the memo of a stream's repeated bytes meets in service.
func BenchmarkDecodeClassifyEngines(b *testing.B) {
	words := []string{" The", " capital", " of", " France", " is", " Paris", ".", "\\n", " It", " has", " \\\"", "é"}
	for _, engine := range []struct{ name, chunk, text string }{
		{"vllm", vllmContent, `" Paris"`},
		{"vllm-usage", vllmContentUsage, `" Paris"`},
		{"sglang", sglangContent, `"Hi"`},
		{"llamacpp", llamaContent, `"Bonjour"`},
	} {
		b.Run(engine.name, func(b *testing.B) {
			var stream []byte
			for i := range 200 {
				chunk := strings.Replace(engine.chunk, engine.text, `"`+words[i%len(words)]+`"`, 1)
				chunk = strings.Replace(chunk, `"total_tokens":9,"completion_tokens":4`,
					fmt.Sprintf(`"total_tokens":%d,"completion_tokens":%d`, 5+i+1, i+1), 1)
				stream = AppendData(stream, []byte(chunk))
			}
			var d Decoder
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			outputs := 0
			for b.Loop() {
				decodeReads(&d, stream, func(e Event) { outputs += e.Outputs })
			}
			if outputs != 200*b.N {
				b.Fatalf("saw %d outputs, want %d", outputs, 200*b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/event")
		})
	}
}

// decodeReads decodes stream from the start, in reads of 4 KiB as an engine's socket gives
// them, and hands every event to visit.
func decodeReads(d *Decoder, stream []byte, visit func(Event)) {
	d.Reset()
	for i := 0; i < len(stream); i += 4096 {
		d.Append(stream[i:min(i+4096, len(stream))])
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			visit(e)
		}
	}
}
