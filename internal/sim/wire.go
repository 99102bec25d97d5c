package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// replyFormat is how one endpoint puts a generation on the wire. The
// generation itself (queue, prefill, decode, faults, records) is the same
// for every endpoint, as it is in vLLM, whose Messages and Responses
// endpoints drive the same engine as chat; only the bytes differ.
type replyFormat interface {
	// stream returns the renderer of a streamed reply. It is called once,
	// when the stream's headers go out.
	stream(g *generation) streamWire
	// whole renders a finished non-stream reply: its HTTP status and body.
	// A status other than 200 is an error the endpoint's server raises
	// after the engine finished.
	whole(g *generation) (int, []byte)
	// garbageWhole is a non-stream reply cut off inside its JSON.
	garbageWhole(g *generation) []byte
	// oversizeWhole is a valid non-stream reply of more than oversizeBytes.
	oversizeWhole(g *generation) []byte
	// errorBody renders an error reply of this endpoint.
	errorBody(s *Server, e apiError) []byte
}

// streamWire renders one streamed reply. generation calls it in the order
// of the reply: preamble as the headers go out, open once the first token
// exists, text or tool chunks and each choice's finish as they are due,
// and close once every choice finished. Each call appends to a buffer that
// generation writes, flushes and resets.
type streamWire interface {
	preamble()
	open(seqs []*sequence)
	text(q *sequence, text []byte)
	toolStart(q *sequence, args []byte)
	toolArgs(q *sequence, args []byte)
	finish(q *sequence)
	close(computed int)
	// failure appends the endpoint's mid-stream error for e (and the
	// stream's terminator when done is set and the endpoint sends one). It
	// reports true when the endpoint has no such event and its server
	// instead drops the connection in the middle of the body.
	failure(e apiError, done bool) (cut bool)
	// heldFailure appends the endpoint's error event for e for a stream
	// that is then held open (error:hang): an event even where vLLM's
	// server would drop the connection instead, since the fault is a
	// report of failure that no end follows.
	heldFailure(e apiError)
	// garbage is one event cut off inside its JSON; oversize one valid
	// event of more than oversizeBytes.
	garbage() []byte
	oversize() []byte
	bytes() []byte
	reset()
}

// formatFor returns the reply format of an endpoint.
func formatFor(endpoint string) replyFormat {
	switch endpoint {
	case endpointMessages:
		return messagesFormat{}
	case endpointResponses:
		return responsesFormat{}
	case endpointEmbeddings:
		return embeddingsFormat{}
	}
	return openAIFormat{}
}

// openAIFormat is the chat and text completion endpoints' format.
type openAIFormat struct{}

func (openAIFormat) stream(g *generation) streamWire {
	return &openAIWire{
		g:   g,
		enc: newStreamEncoder(g.spec.endpoint, g.id, g.created, g.s.cfg.Model, g.spec.continuousUsage),
	}
}

func (openAIFormat) whole(g *generation) (int, []byte) {
	body, err := json.Marshal(completionBody(&g.spec, g.id, g.created, g.s.cfg.Model, g.seqs))
	if err != nil {
		return http.StatusInternalServerError, g.s.errorJSON(apiError{status: http.StatusInternalServerError, message: "encoding the reply: " + err.Error()})
	}
	return http.StatusOK, body
}

func (f openAIFormat) garbageWhole(g *generation) []byte {
	b := f.wholeHead(g)
	return append(b, f.textKey(g)...)
}

func (f openAIFormat) oversizeWhole(g *generation) []byte {
	b := f.wholeHead(g)
	b = append(b, f.textKey(g)...)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	if g.spec.endpoint == endpointChat {
		return append(b, `"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
	}
	return append(b, `","logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
}

func (openAIFormat) errorBody(s *Server, e apiError) []byte { return s.errorJSON(e) }

// wholeHead opens a non-stream reply up to its first choice's fields.
func (openAIFormat) wholeHead(g *generation) []byte {
	object := "text_completion"
	if g.spec.endpoint == endpointChat {
		object = "chat.completion"
	}
	return fmt.Appendf(nil, `{"id":%q,"object":"%s","created":%d,"model":%q,"choices":[{"index":0,"`, g.id, object, g.created, g.s.cfg.Model)
}

// textKey opens the string that carries a choice's text, up to its quote.
func (openAIFormat) textKey(g *generation) string {
	switch {
	case g.spec.endpoint != endpointChat:
		return `text":"`
	case g.spec.stream:
		return `delta":{"content":"`
	default:
		return `message":{"role":"assistant","content":"`
	}
}

// openAIWire streams chat and text completion chunks through streamEncoder.
type openAIWire struct {
	g   *generation
	enc *streamEncoder
}

func (w *openAIWire) preamble() {}

func (w *openAIWire) open(seqs []*sequence) {
	for _, r := range seqs {
		// vLLM's role chunks report no completion tokens, even for the
		// choice whose first token is about to follow.
		w.enc.role(r.choice, chunkUsage{prompt: len(r.prompt.ids)})
	}
}

func (w *openAIWire) text(q *sequence, text []byte) { w.enc.text(q.choice, text, q.usage()) }

func (w *openAIWire) toolStart(q *sequence, args []byte) {
	w.enc.toolStart(q.choice, q.call, args, q.usage())
}

func (w *openAIWire) toolArgs(q *sequence, args []byte) {
	w.enc.toolArgs(q.choice, q.call, args, w.g.spec.tools.mode == toolsRequired, q.usage())
}

func (w *openAIWire) finish(q *sequence) {
	w.enc.finish(q.choice, q.finishReason(&w.g.spec), q.usage())
}

func (w *openAIWire) close(computed int) {
	if w.g.spec.includeUsage {
		w.enc.usage(w.g.spec.promptTokens(), computed)
	}
	w.enc.done()
}

func (w *openAIWire) failure(e apiError, done bool) bool {
	body := streamErrorJSON(e) // vLLM's json.dumps rendering of the event
	if w.g.s.cfg.LegacyErrors {
		body = w.g.s.errorJSON(e)
	}
	w.enc.errorEvent(body)
	if done {
		w.enc.done()
	}
	return false
}

func (w *openAIWire) heldFailure(e apiError) { w.failure(e, false) }

func (w *openAIWire) garbage() []byte {
	b := append([]byte(nil), w.enc.head...)
	b = append(b, `,"choices":[{"index":0,"`...)
	b = append(b, openAIFormat{}.textKey(w.g)...)
	return append(b, "\n\n"...)
}

func (w *openAIWire) oversize() []byte {
	b := append([]byte(nil), w.enc.head...)
	b = append(b, `,"choices":[{"index":0,"`...)
	b = append(b, openAIFormat{}.textKey(w.g)...)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	if w.g.spec.endpoint == endpointChat {
		return append(b, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	return append(b, `","logprobs":null,"finish_reason":null,"stop_reason":null}]}`+"\n\n"...)
}

func (w *openAIWire) bytes() []byte { return w.enc.bytes() }
func (w *openAIWire) reset()        { w.enc.reset() }
