// Package trace is the document that reproduces one request: what the client sent (body,
// headers without credentials, the sampling parameters), each attempt the gateway made
// (replica, weights revision, lease epoch, timing, the body sent when it differed), what the
// client received, and how the request ended. The gateway serves it at
// GET /admin/requests/{id}/trace, the chaos checker writes one per violation, and
// `fencegate replay` resends the request and compares what comes back with what the client
// received (docs/design.md §7, Traces).
//
// The package is pure: building, reading and comparing documents; no network, no files.
package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Format names the version of the document.
const Format = "fencegate-trace/1"

// Document is one request's trace.
type Document struct {
	Format    string `json:"format"`
	RequestID string `json:"request_id"`
	// Source is what wrote it: "gateway" or "chaos".
	Source   string    `json:"source"`
	Request  Request   `json:"request"`
	Attempts []Attempt `json:"attempts"`
	Received Received  `json:"received"`
	Outcome  Outcome   `json:"outcome"`
	// Note says why the document was written, when it was not a request's own trace (a
	// chaos violation: the rule broken).
	Note string `json:"note,omitempty"`
}

// Request is the request as the client sent it.
type Request struct {
	ReceivedAt time.Time `json:"received_at"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	// Headers are the client's, credentials removed (see RedactHeaders).
	Headers http.Header `json:"headers,omitempty"`
	// Body is the body as received: JSON as is, anything else as a JSON string.
	Body json.RawMessage `json:"body"`
	// Sampling repeats the body's members that decide the answer (model, seed,
	// temperature, …), those present only, as sent.
	Sampling map[string]json.RawMessage `json:"sampling,omitempty"`
}

// Attempt is one attempt of the gateway on a replica.
type Attempt struct {
	ID            string    `json:"id"`
	N             int       `json:"n"`
	Replica       string    `json:"replica"`
	URL           string    `json:"url,omitempty"`
	ModelRevision string    `json:"model_revision,omitempty"`
	LeaseEpoch    uint64    `json:"lease_epoch,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
	EndReason     string    `json:"end_reason,omitempty"`
	Failure       string    `json:"failure,omitempty"`
	// EngineMayHaveActed: the request let the engine run tools itself and this attempt's
	// body may have reached it, so a tool may have run (docs/design.md §5): replaying the
	// request may run it again.
	EngineMayHaveActed bool `json:"engine_may_have_acted,omitempty"`
	// SentBody is the body sent to the engine when it differs from the client's (the
	// gateway asks vLLM and SGLang for per-chunk usage); absent when it is the same.
	SentBody json.RawMessage `json:"sent_body,omitempty"`
}

// Received is what the client received.
type Received struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	// Chunks are the server-sent events in order (each with its blank line), or the one
	// whole body of an answer that was not streamed.
	Chunks []Chunk `json:"chunks"`
	// Bytes and SHA256 cover everything received, kept or hashed.
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Chunk is one event (or the whole body): its text while the trace's byte limit allows,
// past it only its hash and length.
type Chunk struct {
	Text   string `json:"text,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Bytes  int    `json:"bytes,omitempty"`
}

// Kept reports whether the chunk's text is in the trace.
func (c Chunk) Kept() bool { return c.SHA256 == "" }

// Outcome is how the request ended.
type Outcome struct {
	Outcome               string          `json:"outcome"`
	Error                 json.RawMessage `json:"error,omitempty"`
	DeliveredOutputTokens int             `json:"delivered_output_tokens"`
	FirstDeltaAt          time.Time       `json:"first_delta_at,omitzero"`
	EndedAt               time.Time       `json:"ended_at,omitzero"`
}

// credentialHeaders never enter a trace: they authenticate the client (or the gateway).
var credentialHeaders = map[string]bool{
	"Authorization":         true,
	"Proxy-Authorization":   true,
	"X-Api-Key":             true,
	"Api-Key":               true,
	"Cookie":                true,
	"Set-Cookie":            true,
	"X-Fencegate-Agent-Key": true,
}

// RedactHeaders returns h without credentials: the headers that carry them by name, and any
// whose name says it holds a key, a token, a secret or a password. What remains (the
// content type, the SDK's own headers, trace context, a simulator's fault header, the
// Idempotency-Key) is what a replay may need.
func RedactHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if credentialHeaders[ck] || holdsSecret(ck) {
			continue
		}
		out[ck] = append([]string(nil), v...)
	}
	return out
}

func holdsSecret(name string) bool {
	n := strings.ToLower(name)
	if n == "idempotency-key" || n == "x-idempotency-key" {
		return false // identifies the request, authenticates nothing
	}
	for _, w := range []string{"key", "token", "secret", "password", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// samplingMembers are the body members that decide what a model answers.
var samplingMembers = []string{
	"model", "stream", "n", "seed", "temperature", "top_p", "top_k", "min_p",
	"max_tokens", "max_completion_tokens", "max_output_tokens", "stop", "stop_sequences",
	"presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
	"ignore_eos", "response_format", "tool_choice", "reasoning", "logprobs", "top_logprobs",
}

// BodyJSON returns b as a JSON value for a document: itself when it is valid JSON, else a
// JSON string of it.
func BodyJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return append(json.RawMessage(nil), b...)
	}
	s, _ := json.Marshal(string(b))
	return s
}

// Sampling picks the members of a JSON body that decide the answer.
func Sampling(body []byte) map[string]json.RawMessage {
	if !gjson.ValidBytes(body) {
		return nil
	}
	return SamplingOf(func(name string) ([]byte, bool) {
		v := gjson.GetBytes(body, name)
		return []byte(v.Raw), v.Exists()
	})
}

// SamplingOf is Sampling for a body whose top-level members are known already: member
// returns the value of the member called name.
func SamplingOf(member func(name string) ([]byte, bool)) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, m := range samplingMembers {
		if v, ok := member(m); ok {
			out[m] = json.RawMessage(v)
		}
	}
	return out
}

// Recorder keeps what a client receives, for a trace: each event's text until limit bytes
// were kept, then only hashes. Its zero value is not usable; see NewRecorder.
type Recorder struct {
	limit  int
	kept   int
	total  int
	sum    hashState
	chunks []Chunk
	// partial is the start of an event whose end was not written yet.
	partial []byte
	stream  bool
}

type hashState interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
}

// NewRecorder records up to limit bytes of text (then hashes); stream says whether the
// bytes are server-sent events (split at blank lines) or one body.
func NewRecorder(limit int, stream bool) *Recorder {
	return &Recorder{limit: limit, sum: sha256.New(), stream: stream}
}

// Write records b, as the client was sent it.
func (r *Recorder) Write(b []byte) {
	r.total += len(b)
	r.sum.Write(b)
	if !r.stream {
		r.partial = append(r.partial, b...)
		return
	}
	r.partial = append(r.partial, b...)
	for {
		i := eventEnd(r.partial)
		if i < 0 {
			return
		}
		r.add(r.partial[:i])
		r.partial = append(r.partial[:0], r.partial[i:]...)
	}
}

// eventEnd returns the length of the first complete event in b (through its blank line),
// or -1.
func eventEnd(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' && b[i+1] == '\n' {
			return i + 2
		}
		if b[i] == '\n' && b[i+1] == '\r' && i+2 < len(b) && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

func (r *Recorder) add(b []byte) {
	if r.kept+len(b) <= r.limit {
		r.kept += len(b)
		r.chunks = append(r.chunks, Chunk{Text: string(b)})
		return
	}
	h := sha256.Sum256(b)
	r.chunks = append(r.chunks, Chunk{SHA256: hex.EncodeToString(h[:]), Bytes: len(b)})
}

// Received returns what was recorded, an unfinished last event or the body included.
func (r *Recorder) Received(status int, contentType string) Received {
	chunks := append([]Chunk(nil), r.chunks...)
	if len(r.partial) > 0 {
		save := r.chunks
		r.add(r.partial)
		chunks = append(chunks, r.chunks[len(r.chunks)-1])
		r.chunks = save
	}
	return Received{Status: status, ContentType: contentType, Chunks: chunks, Bytes: r.total,
		SHA256: hex.EncodeToString(r.sum.Sum(nil))}
}
