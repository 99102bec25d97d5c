package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The recordings of a real llama-server (internal/sim/testdata/llamacpp, see its README):
// the same request ("hello", 3 tokens) streamed and whole, in each API.
const recordings = "../sim/testdata/llamacpp"

// recorded reads a recording as a client receives it: a stream's events (the recording's
// leading comment line, which names the request, dropped) or a whole body.
func recorded(t *testing.T, name string) Received {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recordings, name))
	if err != nil {
		t.Fatal(err)
	}
	stream := strings.HasSuffix(name, ".sse")
	if stream {
		if i := strings.Index(string(b), "\n\n"); strings.HasPrefix(string(b), ":") && i >= 0 {
			b = b[i+2:]
		}
	}
	rec := NewRecorder(1<<20, stream)
	rec.Write(b)
	ct := "application/json"
	if stream {
		ct = "text/event-stream"
	}
	return rec.Received(http.StatusOK, ct)
}

func TestTranscriptsOfEachAPI(t *testing.T) {
	for _, api := range []struct{ path, stream, whole string }{
		{"/v1/chat/completions", "chat_stream.sse", "chat.json"},
		{"/v1/completions", "completions_stream.sse", "completions.json"},
		{"/v1/messages", "messages_stream.sse", "messages.json"},
		{"/v1/responses", "responses_stream.sse", "responses.json"},
	} {
		s := Read(api.path, recorded(t, api.stream))
		w := Read(api.path, recorded(t, api.whole))
		if s.End != EndComplete || w.End != EndComplete {
			t.Errorf("%s: ends %s (stream) and %s (whole), want complete", api.path, s.End, w.End)
		}
		if s.text(0) == "" || s.text(0) != w.text(0) {
			t.Errorf("%s: the stream says %q, the whole answer %q", api.path, s.text(0), w.text(0))
		}
		if c := Compare(s, w); c.Verdict != Identical {
			t.Errorf("%s: stream vs whole: %+v", api.path, c)
		}
	}
	// The three chat-templated APIs say the same words for the same prompt.
	chat := Read("/v1/chat/completions", recorded(t, "chat_stream.sse")).text(0)
	for _, p := range []struct{ path, file string }{{"/v1/messages", "messages_stream.sse"}, {"/v1/responses", "responses_stream.sse"}} {
		if got := Read(p.path, recorded(t, p.file)).text(0); got != chat {
			t.Errorf("%s says %q, chat %q", p.path, got, chat)
		}
	}
	n2 := Read("/v1/chat/completions", recorded(t, "chat_stream_n2.sse"))
	if len(n2.Choices) != 2 || n2.text(0) == "" || n2.text(1) == "" || n2.End != EndComplete {
		t.Errorf("n=2 transcript %+v", n2)
	}
}

// chunksOf splits a stream into its events, as the client received them.
func chunksOf(t *testing.T, name string) []Chunk {
	return recorded(t, name).Chunks
}

func received(chunks []Chunk) Received {
	return Received{Status: 200, ContentType: "text/event-stream", Chunks: chunks}
}

func TestCompare(t *testing.T) {
	const chat = "/v1/chat/completions"
	full := chunksOf(t, "chat_stream.sse")
	// Events: role, three content deltas, finish, [DONE].
	contentEvents := 0
	for _, c := range full {
		if strings.Contains(c.Text, `"content":"`) && !strings.Contains(c.Text, `"content":""`) {
			contentEvents++
		}
	}
	if contentEvents < 3 || len(full) < 5 {
		t.Fatalf("the recording has %d events, %d with content", len(full), contentEvents)
	}
	errEvent := Chunk{Text: "data: {\"error\":{\"message\":\"the replica stopped\",\"type\":\"server_error\",\"code\":\"upstream_decode_interrupted\"}}\n\n"}
	cut := append([]Chunk(nil), full[:3]...) // role and two deltas, then nothing
	interrupted := append(append([]Chunk(nil), full[:3]...), errEvent)
	other := chunksOf(t, "chat_stream_n2.sse") // another answer (2 tokens, two choices)

	tr := func(c []Chunk) *Transcript { return Read(chat, received(c)) }
	cases := []struct {
		name            string
		original, rerun []Chunk
		want            Verdict
		agrees          bool
	}{
		{"same answer", full, full, Identical, true},
		{"client interrupted, replay completes", interrupted, full, Extends, true},
		{"client cut silently, replay completes", cut, full, Extends, true},
		{"same failure at the same point", interrupted, cut, SamePoint, true},
		{"replay stops earlier", full, cut, StopsEarlier, false},
		{"a different answer", full, other, Diverges, false},
	}
	for _, c := range cases {
		got := Compare(tr(c.original), tr(c.rerun))
		if got.Verdict != c.want || got.Agrees() != c.agrees {
			t.Errorf("%s: %+v, want %s", c.name, got, c.want)
		}
	}

	// A splice: the start of one answer and the rest of another is found, and where.
	spliced := append(append([]Chunk(nil), full[:2]...), other[2:]...)
	got := Compare(tr(spliced), tr(full))
	if got.Verdict != Diverges || !strings.Contains(got.Original, "⟨here⟩") {
		t.Errorf("splice: %+v", got)
	}
	// A complete answer followed by more is not the same answer.
	longer := append(append([]Chunk(nil), full[:len(full)-2]...), full[2:]...)
	if got := Compare(tr(full), tr(longer)); got.Verdict != Diverges {
		t.Errorf("a complete original and a longer replay: %+v", got)
	}
}

func TestRecorderKeepsEventsThenHashes(t *testing.T) {
	stream := "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: {\"a\":3}\n\n"
	r := NewRecorder(30, true)
	// Written in pieces that split events, as flushes do.
	for _, piece := range []string{stream[:5], stream[5:20], stream[20:]} {
		r.Write([]byte(piece))
	}
	got := r.Received(200, "text/event-stream")
	if len(got.Chunks) != 3 || got.Chunks[0].Text != "data: {\"a\":1}\n\n" || got.Chunks[1].Text != "data: {\"a\":2}\n\n" {
		t.Fatalf("chunks %+v", got.Chunks)
	}
	third := sha256.Sum256([]byte("data: {\"a\":3}\n\n"))
	if got.Chunks[2].Kept() || got.Chunks[2].SHA256 != hex.EncodeToString(third[:]) || got.Chunks[2].Bytes != 15 {
		t.Fatalf("past the limit: %+v", got.Chunks[2])
	}
	all := sha256.Sum256([]byte(stream))
	if got.Bytes != len(stream) || got.SHA256 != hex.EncodeToString(all[:]) {
		t.Fatalf("totals %d %s", got.Bytes, got.SHA256)
	}
	if v := Compare(Read("/v1/completions", got), Read("/v1/completions", received([]Chunk{{Text: "data: {\"a\":1}\n\n"}}))); v.Verdict != Unknown {
		t.Fatalf("a hashed original: %+v", v)
	}

	// An unfinished last event is kept as it is.
	r = NewRecorder(1<<10, true)
	r.Write([]byte("data: {\"a\":1}\n\ndata: {\"a\""))
	if got := r.Received(200, "text/event-stream"); len(got.Chunks) != 2 || got.Chunks[1].Text != "data: {\"a\"" {
		t.Fatalf("unfinished: %+v", got.Chunks)
	}
}

func TestRedactHeaders(t *testing.T) {
	h := http.Header{
		"Authorization": {"Bearer sk-1"}, "X-Api-Key": {"k"}, "Cookie": {"c"},
		"X-Custom-Token": {"t"}, "Openai-Organization": {"org"}, "Idempotency-Key": {"idem-1"},
		"Content-Type": {"application/json"}, "X-Sim-Fault": {"reset@prefill"}, "Traceparent": {"00-…"},
		"X-Fencegate-Agent-Key": {"s"}, "Anthropic-Version": {"2023-06-01"},
	}
	got := RedactHeaders(h)
	for _, gone := range []string{"Authorization", "X-Api-Key", "Cookie", "X-Custom-Token", "X-Fencegate-Agent-Key"} {
		if _, ok := got[gone]; ok {
			t.Errorf("%s kept", gone)
		}
	}
	for _, kept := range []string{"Openai-Organization", "Idempotency-Key", "Content-Type", "X-Sim-Fault", "Traceparent", "Anthropic-Version"} {
		if got.Get(kept) == "" {
			t.Errorf("%s dropped", kept)
		}
	}
}

func TestSamplingAndBody(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"seed":42,"max_tokens":5,"stream":true}`)
	s := Sampling(body)
	want := map[string]string{"model": `"m"`, "temperature": "0.7", "seed": "42", "max_tokens": "5", "stream": "true"}
	if len(s) != len(want) {
		t.Fatalf("sampling %v", s)
	}
	for k, v := range want {
		if string(s[k]) != v {
			t.Errorf("%s = %s, want %s", k, s[k], v)
		}
	}
	if Sampling([]byte("not json")) != nil {
		t.Error("sampling of a body that is not JSON")
	}
	var str string
	if err := json.Unmarshal(BodyJSON([]byte("not json")), &str); err != nil || str != "not json" {
		t.Errorf("a body that is not JSON: %q %v", str, err)
	}
	if string(BodyJSON(body)) != string(body) {
		t.Error("a JSON body is kept as is")
	}
}
