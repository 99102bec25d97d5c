package request

import (
	"bytes"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/protocol"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/tidwall/gjson"
)

// shaper is what the client receives of the engine's answer: each event as the engine
// wrote it unless it must be rewritten (the usage the gateway asked for removed, a null
// error removed, tool call ids made the request's own), the events held before the
// delivery boundary, and what the API's final events need to know of the stream. The owner
// writes what it shapes (the machine decides when); the shaper does no I/O.
type shaper struct {
	req *openai.Request
	// members are the request body's top-level members, where the usage options go.
	members openai.Members
	id      string // the logical request id, which tool call ids derive from
	// proto is the API's wire format; st what its final events need to know of the
	// stream (the Responses API numbers its events). curSeq and heldSeq are the sequence
	// numbers of the current event and of the last held one (-1: none).
	proto   sse.Protocol
	st      protocol.Stream
	curSeq  int64
	heldSeq int64
	// raw is the event (or body) the current step is about; held the held events of the
	// current attempt; rewritten an event the gateway had to rewrite; stripped an event's
	// data without the usage the gateway asked for.
	raw       []byte
	held      []byte
	rewritten []byte
	stripped  []byte
	// data is the current event's data as the client gets it (rewritten or not), until
	// it is written; heldData the data of the held events of a Responses stream, which
	// st.Output reads once they are written.
	data     []byte
	heldData [][]byte
	// wantUsage: ask engines that can (Pick.UsagePerChunk) for usage in every chunk, to
	// count delivered tokens; usageBodyCache is the request body that asks for it.
	wantUsage      bool
	usageBodyCache *engineBody
}

func newShaper(req *openai.Request, members openai.Members, id string) shaper {
	p := protocol.Of(req.Endpoint)
	return shaper{req: req, members: members, id: id, proto: p, curSeq: -1, heldSeq: -1,
		// Delivered tokens are counted from the engine's own per-chunk usage where it can
		// report it; the gateway asks for it unless the client already did.
		wantUsage: req.Stream && !req.ContinuousUsage && p == sse.Completions}
}

// note reads what the stream's final events need from the current event: its sequence
// number and, for the Responses API, the response it names.
func (sh *shaper) note(ev sse.Event) {
	sh.curSeq = ev.Sequence
	// The current attempt's first lifecycle event names its response; a failed attempt's
	// is forgotten with its held events (discardHeld).
	if sh.proto == sse.Responses && sh.st.ResponseID == "" && ev.Class == 0 {
		sh.noteResponse(ev.Data)
	}
}

// event prepares one SSE event for the client, rewriting it only where it must, and
// returns its bytes, which stay valid until the next call. strip: the event carries usage
// that the gateway asked for and the client did not.
func (sh *shaper) event(ev sse.Event, strip bool) []byte {
	if strip && onlyStripped(ev) {
		sh.rewritten = appendStripped(sh.rewritten[:0], ev)
		sh.data = nil // the Completions APIs only: no final event reads it
		return sh.rewritten
	}
	data, rewrite := ev.Data, false
	if strip {
		// This is on the token path: the member is cut out by its offsets, into a reused
		// buffer.
		sh.stripped = append(append(sh.stripped[:0], data[:ev.UsageStart]...), data[ev.UsageEnd:]...)
		data, rewrite = sh.stripped, true
	}
	if ev.Class&sse.NullError != 0 {
		// Never forward "error": null in an ordinary chunk (docs/design.md §2): the
		// official SDKs take any "error" key for an error. Rare: it may allocate.
		data, rewrite = sse.StripNullError(nil, data), true
	}
	if ev.Class&sse.ToolCalls != 0 {
		if d, ok := rewriteToolIDs(sh.proto, data, true, sh.id); ok {
			data, rewrite = d, true
		}
	}
	sh.data = data
	if !rewrite {
		return ev.Raw
	}
	// Rare or cheap, so the event is rebuilt as one data line (after its name).
	sh.rewritten = sh.rewritten[:0]
	if ev.Name != nil {
		sh.rewritten = append(append(append(sh.rewritten, "event: "...), ev.Name...), '\n')
	}
	sh.rewritten = sse.AppendData(sh.rewritten, data)
	return sh.rewritten
}

// appendEvent appends to dst the bytes event returns for ev, with one copy where event
// would return its own buffer: a run of chunks written as one (passing.go).
func (sh *shaper) appendEvent(dst []byte, ev sse.Event, strip bool) []byte {
	if strip && onlyStripped(ev) {
		sh.data = nil
		return appendStripped(dst, ev)
	}
	return append(dst, sh.event(ev, strip)...)
}

// onlyStripped reports whether removing the usage is all the rewriting a chunk of the
// Completions APIs needs: then its bytes are built straight from its data's two sides.
func onlyStripped(ev sse.Event) bool {
	return ev.Class&(sse.NullError|sse.ToolCalls) == 0 && ev.Name == nil
}

// appendStripped appends ev as one data line without the usage member the gateway asked
// for (the bytes sse.AppendData writes of the stripped data).
func appendStripped(dst []byte, ev sse.Event) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, ev.Data[:ev.UsageStart]...)
	dst = append(dst, ev.Data[ev.UsageEnd:]...)
	return append(dst, '\n', '\n')
}

// noteResponse keeps what the Responses API's final events need from a lifecycle event
// (response.created): the response's id, model and creation time.
func (sh *shaper) noteResponse(data []byte) {
	r := gjson.GetBytes(data, "response")
	if id := r.Get("id"); id.Type == gjson.String {
		sh.st.ResponseID, sh.st.Model, sh.st.CreatedAt = id.String(), r.Get("model").String(), r.Get("created_at").Int()
	}
}

// body prepares a complete non-streaming answer for the client and returns it with the
// output tokens it reports.
func (sh *shaper) body(b []byte) ([]byte, int) {
	var tokens int
	rewrite := false
	switch sh.proto {
	case sse.Messages:
		tokens = int(gjson.GetBytes(b, "usage.output_tokens").Int())
		rewrite = bytes.Contains(b, []byte(`"tool_use"`))
	case sse.Responses:
		tokens = int(gjson.GetBytes(b, "usage.output_tokens").Int())
		rewrite = bytes.Contains(b, []byte(`"function_call"`))
	default:
		tokens = int(gjson.GetBytes(b, "usage.completion_tokens").Int())
		rewrite = sh.req.Endpoint != openai.Embeddings && sse.Classify(b)&sse.ToolCalls != 0
	}
	sh.data = nil // a whole answer: no final event will report its output
	if rewrite {
		b, _ = rewriteToolIDs(sh.proto, b, false, sh.id)
	}
	if sh.proto == sse.Responses {
		sh.st.ResponseID = gjson.GetBytes(b, "id").String()
	}
	return b, tokens
}

// hold keeps the current event until the boundary is crossed (the machine's ActHold).
func (sh *shaper) hold() {
	sh.held = append(sh.held, sh.raw...)
	sh.heldSeq = max(sh.heldSeq, sh.curSeq)
	if sh.proto == sse.Responses {
		sh.heldData = append(sh.heldData, bytes.Clone(sh.data))
	}
	sh.data = nil
}

// discardHeld drops the held events of an attempt that failed (ActDiscardHeld).
func (sh *shaper) discardHeld() {
	sh.held = sh.held[:0]
	sh.heldSeq = -1
	clear(sh.heldData)
	sh.heldData = sh.heldData[:0]
	// The response the discarded events named (response.created) never reaches the
	// client: the final events and the journal name the response of the attempt whose
	// events the client does receive.
	sh.st.ResponseID, sh.st.Model, sh.st.CreatedAt = "", "", 0
}

// heldWritten notes that the held events were written (ActWriteHeld).
func (sh *shaper) heldWritten() {
	sh.held = sh.held[:0]
	for _, d := range sh.heldData {
		sh.st.Output.Add(d)
	}
	clear(sh.heldData)
	sh.heldData = sh.heldData[:0]
	if sh.heldSeq >= 0 {
		sh.st.NextSequence = max(sh.st.NextSequence, sh.heldSeq+1)
	}
}

// sent notes that the current event, numbered seq, reached the client (the Responses API:
// the gateway's own final events continue the numbering, and response.failed reports the
// output items the client received).
func (sh *shaper) sent(seq int64) {
	if seq >= 0 {
		sh.st.NextSequence = max(sh.st.NextSequence, seq+1)
	}
	if sh.proto == sse.Responses && sh.data != nil {
		sh.st.Output.Add(sh.data)
	}
	sh.data = nil
}

// done is the end event of a stream the engine left without its own.
func (sh *shaper) done() []byte { return protocol.Done(sh.proto) }

// usageBody is the request body asking the engine for usage in every chunk (vLLM's and
// SGLang's stream_options.continuous_usage_stats), made once per request; the client's
// bytes are not copied for it (withUsage). The usage the client did not ask for is
// stripped again.
func (sh *shaper) usageBody() engineBody {
	if sh.usageBodyCache == nil {
		b, err := withUsage(sh.req.Body, sh.members)
		if err != nil {
			b = clientBody(sh.req.Body)
		}
		sh.usageBodyCache = &b
	}
	return *sh.usageBodyCache
}
