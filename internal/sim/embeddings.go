package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// POST /v1/embeddings as vLLM serves it for a pooling model
// (vllm/entrypoints/pooling/embed: api_router.py, protocol.py,
// serving.py OpenAIServingEmbedding). vLLM registers the pooling routes
// only for a model that supports a pooling task, and the generation
// routes (chat, completions, Messages, Responses) only for one that
// generates (build_app, register_generate_api_routers): so a replica
// started with Config.Task "embed" answers 404 {"detail":"Not Found"} on
// the generation endpoints and a "generate" replica answers the same on
// /v1/embeddings.
//
// The reply is EmbeddingResponse.model_dump(): id "embd-" and a hex uuid,
// object "list", one {"index","object":"embedding","embedding"} per input
// in input order, and usage with the prompts' tokens (completion_tokens 0,
// prompt_tokens_details null). Each input is its own engine request. A
// vector is a pure function of (replica name, input), L2-normalised as
// vLLM's embedding pooler returns it by default, and in float32, so its
// numbers are float32 values widened to float64 as Python prints them;
// "base64" is the float32 bytes in the requested byte order (native is
// little-endian on the engines' hosts). An embedding has no output tokens,
// so the faults' computed:K and sent:K points never come.

// Values of Config.Task.
const (
	TaskGenerate = "generate" // chat, completions, Messages and Responses
	TaskEmbed    = "embed"    // embeddings
)

// defaultEmbeddingDim is Config.EmbeddingDim's default, the hidden size of
// the small sentence-embedding models commonly served this way.
const defaultEmbeddingDim = 384

// embedOptions is how an embeddings request wants its vectors encoded.
type embedOptions struct {
	base64    bool
	bigEndian bool
}

// parseEmbeddings decodes and validates an embeddings body: an
// EmbeddingCompletionRequest (input) or an EmbeddingChatRequest
// (messages), the union FastAPI validates it against.
func (s *Server) parseEmbeddings(body []byte) (generationSpec, *apiError) {
	spec := generationSpec{endpoint: endpointEmbeddings, n: 1}
	fields, bad := decodeBody(body)
	if bad != nil {
		return spec, bad
	}
	trimmed := bytes.TrimSpace(body)
	var v validationErrors
	_, hasInput := fields["input"]
	_, hasMessages := fields["messages"]
	if !hasInput && !hasMessages {
		// Both members of the union fail, each on its required field.
		v.missing(trimmed, "body", "EmbeddingCompletionRequest", "input")
		v.missing(trimmed, "body", "EmbeddingChatRequest", "messages")
		return spec, v.err()
	}
	member := "EmbeddingCompletionRequest"
	if !hasInput {
		member = "EmbeddingChatRequest"
	}
	format := "float"
	if raw := fields["encoding_format"]; present(raw) {
		_ = json.Unmarshal(raw, &format)
		switch format {
		case "float", "base64", "bytes", "bytes_only":
		default:
			v.add("literal_error", []any{"body", member, "encoding_format"}, "Input should be 'float', 'base64', 'bytes' or 'bytes_only'", pyRepr(raw))
		}
	}
	endianness := "native"
	if raw := fields["endianness"]; present(raw) {
		_ = json.Unmarshal(raw, &endianness)
		switch endianness {
		case "native", "big", "little":
		default:
			v.add("literal_error", []any{"body", member, "endianness"}, "Input should be 'native', 'big' or 'little'", pyRepr(raw))
		}
	}
	model := ""
	if raw := fields["model"]; present(raw) && checkString(&v, raw, "body", member, "model") {
		_ = json.Unmarshal(raw, &model)
	}
	if e := v.err(); e != nil {
		return spec, e
	}
	if model != "" && model != s.cfg.Model {
		return spec, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", model), param: "model"}
	}
	if raw := fields["dimensions"]; present(raw) {
		// PoolingParams.verify: the sim's models are not matryoshka models.
		return spec, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(
			`Model "%s" does not support matryoshka representation, changing output dimensions will lead to poor results.`, s.cfg.Model)}
	}
	if format == "bytes" || format == "bytes_only" {
		return spec, &apiError{status: http.StatusBadRequest, param: "encoding_format", message: fmt.Sprintf(
			`encoding_format %q is not simulated by this replica; use "float" or "base64"`, format)}
	}
	if raw := fields["embed_dtype"]; present(raw) && string(bytes.TrimSpace(raw)) != `"float32"` {
		return spec, &apiError{status: http.StatusBadRequest, param: "embed_dtype", message: fmt.Sprintf(
			`embed_dtype %s is not simulated by this replica; use "float32"`, bytes.TrimSpace(raw))}
	}
	spec.embed = embedOptions{base64: format == "base64", bigEndian: endianness == "big"}
	if hasInput {
		prompts, err := completionPrompts(fields["input"])
		if err != nil {
			return spec, &apiError{status: http.StatusBadRequest, message: "input: " + err.Error(), param: "input"}
		}
		spec.prompts = prompts
	} else {
		var msgs []chatMessageIn
		if err := json.Unmarshal(fields["messages"], &msgs); err != nil || len(msgs) == 0 {
			return spec, &apiError{status: http.StatusBadRequest, message: "Field required: messages (a non-empty list)", param: "messages"}
		}
		rendered := make([]Message, len(msgs))
		for i, m := range msgs {
			text, err := contentText(m.Content)
			if err != nil {
				return spec, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].content: %v", i, err), param: "messages"}
			}
			rendered[i] = Message{Role: m.Role, Content: text}
		}
		// EmbeddingChatRequest.add_generation_prompt defaults to false.
		prompt := renderChat(rendered, false)
		spec.prompts = []promptSpec{{key: prompt, ids: tokenIDs(prompt)}}
	}
	if len(spec.prompts) > maxSequences {
		return spec, &apiError{status: http.StatusBadRequest, param: "input", message: fmt.Sprintf(
			"inputs must be at most %d in the sim, got %d.", maxSequences, len(spec.prompts))}
	}
	for _, p := range spec.prompts {
		switch {
		case len(p.ids) == 0:
			// The engine's input processor.
			return spec, &apiError{status: http.StatusBadRequest, message: "The decoder prompt cannot be empty"}
		case len(p.ids) > s.cfg.MaxModelLen:
			// OpenAIServingEmbedding._validate_input.
			return spec, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(
				"This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.",
				s.cfg.MaxModelLen, len(p.ids))}
		}
	}
	return spec, nil
}

// embed runs a valid embeddings request: it waits for a slot per input,
// prefills every input and answers with their vectors.
func (g *generation) embed() {
	s := g.s
	t, ok := g.enqueue()
	if !ok {
		return
	}
	if err := s.sched.wait(g.ctx, t); err != nil {
		g.endEmbedByContext()
		return
	}
	defer s.sched.releaseSlots(t.slots)
	if g.fire(pointPrefill, 0) {
		return
	}
	for _, p := range g.spec.prompts {
		s.metrics.promptTokens.Add(float64(len(p.ids)))
		if !g.pause(time.Duration(len(p.ids)) * s.cfg.PrefillPerToken) {
			return
		}
	}
	status, body := g.format.whole(g)
	g.w.Header().Set("Content-Type", "application/json")
	g.w.WriteHeader(status)
	if _, err := g.w.Write(body); err != nil {
		g.endEmbedByContext()
		return
	}
	// Each input is an engine request that finished.
	s.metrics.requestSuccess.WithLabelValues("stop").Add(float64(len(g.spec.prompts)))
	s.book.end(g.rec, OutcomeFinished)
}

// endEmbedByContext is endByContext for an embeddings request, whose
// inputs are each an engine request.
func (g *generation) endEmbedByContext() {
	outcome := OutcomeCancelled
	if replicaDown(g.ctx) {
		outcome = OutcomeCrashed
	}
	if g.s.book.end(g.rec, outcome) && outcome == OutcomeCancelled {
		g.s.metrics.requestSuccess.WithLabelValues("abort").Add(float64(max(1, len(g.spec.prompts))))
	}
}

// Embedding returns the vector a replica whose name is salt answers for
// one input of dim dimensions: prompt is the input text, TokenPrompt(ids)
// for token ids. The vector has unit length.
func Embedding(salt, prompt string, dim int) []float32 {
	gen := newGenerator(salt, 0, prompt)
	raw := make([]float64, dim)
	var norm float64
	for i := range raw {
		// A uniform value in [-1, 1) per dimension.
		x := float64(int64(mix64(gen.key+uint64(i+1)*0x9e3779b97f4a7c15))) / (1 << 63)
		raw[i] = x
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dim)
	for i, x := range raw {
		out[i] = float32(x / norm)
	}
	return out
}

// embeddingReply is EmbeddingResponse.
type embeddingReply struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Data    []embeddingData `json:"data"`
	Usage   usage           `json:"usage"`
}

type embeddingData struct {
	Index     int    `json:"index"`
	Object    string `json:"object"`
	Embedding any    `json:"embedding"`
}

// embeddingsFormat is the embeddings endpoint's wire format. It has no
// stream: parseEmbeddings never asks for one, so stream is never called,
// and answers as completions would if it were.
type embeddingsFormat struct{}

func (embeddingsFormat) stream(g *generation) streamWire { return openAIFormat{}.stream(g) }

func (embeddingsFormat) whole(g *generation) (int, []byte) {
	reply := embeddingReply{ID: g.id, Object: "list", Created: g.created, Model: g.s.cfg.Model}
	tokens := 0
	for i, p := range g.spec.prompts {
		vec := Embedding(g.s.cfg.Name, p.key, g.s.cfg.EmbeddingDim)
		d := embeddingData{Index: i, Object: "embedding"}
		if g.spec.embed.base64 {
			order := binary.ByteOrder(binary.LittleEndian)
			if g.spec.embed.bigEndian {
				order = binary.BigEndian
			}
			buf := make([]byte, 4*len(vec))
			for j, x := range vec {
				order.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			d.Embedding = base64.StdEncoding.EncodeToString(buf)
		} else {
			floats := make([]float64, len(vec))
			for j, x := range vec {
				floats[j] = float64(x)
			}
			d.Embedding = floats
		}
		reply.Data = append(reply.Data, d)
		tokens += len(p.ids)
	}
	reply.Usage = usage{PromptTokens: tokens, TotalTokens: tokens}
	body, err := json.Marshal(reply)
	if err != nil {
		e := apiError{status: http.StatusInternalServerError, message: "encoding the reply: " + err.Error()}
		return e.status, g.s.errorJSON(e)
	}
	return http.StatusOK, body
}

func (embeddingsFormat) garbageWhole(g *generation) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"list","created":%d,"model":%q,"data":[{"index":0,"object":"embedding","embedding":[0.0`,
		g.id, g.created, g.s.cfg.Model)
}

func (embeddingsFormat) oversizeWhole(g *generation) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"object":"list","created":%d,"model":%q,"data":[{"index":0,"object":"embedding","embedding":[0.0`,
		g.id, g.created, g.s.cfg.Model)
	b = append(b, strings.Repeat(",0.0", oversizeBytes/4)...)
	tokens := g.spec.promptTokens()
	return fmt.Appendf(b, `]}],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":0,"prompt_tokens_details":null}}`, tokens, tokens)
}

func (embeddingsFormat) errorBody(s *Server, e apiError) []byte { return s.errorJSON(e) }
