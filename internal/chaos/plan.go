package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// clientKind is how a request's client behaves.
type clientKind int

const (
	// clientNormal reads the whole response.
	clientNormal clientKind = iota
	// clientLeave closes its connection part-way: after leaveAfter data events, or at the
	// first keepalive comment (before any output) when leaveAfter is negative.
	clientLeave
	// clientStall stops reading after stallAfter bytes of the body and keeps its connection
	// open, with a small receive buffer, so that the gateway's writes block.
	clientStall
)

// request is one logical request of the plan and what its client saw.
type request struct {
	n int
	// endpoint is the API: "chat", "completions", "messages" (Anthropic), "responses"
	// (OpenAI Responses) or "embeddings". stream says whether the client streams the
	// answer: always for chat and completions, never for embeddings, either for the rest.
	endpoint string
	stream   bool
	prompts  []string // the chat prompt, the completion prompt(s), or the embeddings inputs: an array when more than one
	choicesN int      // the request's n
	// maxTokens bounds every choice; with ignoreEOS every text choice has exactly this many
	// tokens, without it each stops at its own natural length, so that the choices of one
	// answer finish at different times and a fault can cut some after others finished.
	maxTokens int
	ignoreEOS bool
	// includeUsage and continuousUsage are the client's own stream_options.
	includeUsage, continuousUsage bool
	tools                         bool // the answer must be one tool call (chat "required", Messages "any", Responses "required")
	// engineTool: a Responses request with an mcp tool the engine runs itself (on the run's
	// counting tool server) before it answers; it must never run twice for the request.
	engineTool bool
	base64     bool   // embeddings: encoding_format base64
	fault      string // X-Sim-Fault, "" for none
	faultKind  string // the label the report counts the fault under
	// continues is the plan index of an earlier Responses request whose response this one
	// continues (previous_response_id), or -1. prevID is that response's id, known once the
	// earlier client saw it complete; "" sends the request as a fresh one (continueSkipped).
	continues       int
	prevID          string
	continueSkipped bool
	// key is the Idempotency-Key ("" for none). A keyed request is sent again with the
	// same key and body once its client has seen the end (or left); inflightRetry also
	// sends it once while the original runs.
	key           string
	inflightRetry bool
	client        clientKind
	leaveAfter    int
	stallAfter    int

	bodyBytes []byte        // the request body, the same bytes for every retry
	done      chan struct{} // closed when its client and retries are done (a continuation waits for it)
	seen      seen
	inflight  *seen // the retry sent while the original ran
	retry     *seen // the retry sent after the original ended
}

// choices is the number of choices of the answer: prompts × n (embeddings: one answer).
func (r *request) choices() int {
	if r.endpoint == "embeddings" {
		return 1
	}
	return len(r.prompts) * r.choicesN
}

// path is the gateway (and engine) path of r's endpoint.
func (r *request) path() string {
	switch r.endpoint {
	case "completions":
		return "/v1/completions"
	case "messages":
		return "/v1/messages"
	case "responses":
		return "/v1/responses"
	case "embeddings":
		return "/v1/embeddings"
	}
	return "/v1/chat/completions"
}

// model is the pool r goes to: embeddings have a pool of their own, as an embedding model
// is served by engines of its own.
func (r *request) model() string {
	if r.endpoint == "embeddings" {
		return embedModel
	}
	return "sim-model"
}

// seed is the sampling seed the engine uses. The Messages and Responses APIs take none;
// at temperature 0 the engine samples with seed 0, so their answers are as much a
// function of the prompt as a seeded chat's.
func (r *request) seed() int64 {
	if r.endpoint == "messages" || r.endpoint == "responses" {
		return 0
	}
	return requestSeed
}

// protocol names the shape of r's stream and errors: the chat completion chunks for chat
// and completions, the API's own for the others.
func (r *request) protocol() string {
	switch r.endpoint {
	case "messages", "responses", "embeddings":
		return r.endpoint
	}
	return "chat"
}

// requestSeed is the sampling seed of every chat and text completion request.
const requestSeed = 7

// toolParameters is the parameter schema of the one function of a tool-calling request,
// in each API's own tool shape below.
const toolParameters = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`

// toolSchema is the function in the chat shape.
const toolSchema = `{"type":"function","function":{"name":"lookup","parameters":` + toolParameters + `}}`

// engineToolLabel is the server_label of the run's engine-run mcp tool, and the name of
// the counting MCP server the engines call for it; engineToolDecl declares it.
const (
	engineToolLabel = "tickets"
	engineToolDecl  = `{"type":"mcp","server_label":"` + engineToolLabel + `","server_url":"http://tickets.chaos/mcp","require_approval":"never"}`
)

// embedModel is the embedding pool's model.
const embedModel = "sim-embed"

// body is r's request body, streaming or not. Greedy decoding with a fixed seed makes
// every replica's answer a pure function of the body, which is what lets the checker know
// the answer a replica must have streamed.
func (r *request) body(stream bool) []byte {
	var m map[string]any
	switch r.endpoint {
	case "messages":
		m = map[string]any{"model": "sim-model", "max_tokens": r.maxTokens, "temperature": 0, "stream": stream,
			"messages": []map[string]string{{"role": "user", "content": r.prompts[0]}}}
		if r.tools {
			m["tools"] = []json.RawMessage{json.RawMessage(`{"name":"lookup","input_schema":` + toolParameters + `}`)}
			m["tool_choice"] = map[string]string{"type": "any"}
		}
	case "responses":
		m = map[string]any{"model": "sim-model", "max_output_tokens": r.maxTokens, "temperature": 0, "stream": stream, "input": r.prompts[0]}
		if r.tools {
			m["tools"] = []json.RawMessage{json.RawMessage(`{"type":"function","name":"lookup","parameters":` + toolParameters + `}`)}
			m["tool_choice"] = "required"
		}
		if r.engineTool {
			m["tools"] = []json.RawMessage{json.RawMessage(engineToolDecl)}
		}
		if r.prevID != "" {
			m["previous_response_id"] = r.prevID
		}
	case "embeddings":
		m = map[string]any{"model": embedModel, "input": r.prompts[0]}
		if len(r.prompts) > 1 {
			m["input"] = r.prompts
		}
		if r.base64 {
			m["encoding_format"] = "base64"
		}
	default:
		m = r.chatBody(stream)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // maps of strings, numbers and raw JSON always encode
	}
	return b
}

// chatBody is the body of a chat or text completion request.
func (r *request) chatBody(stream bool) map[string]any {
	m := map[string]any{"model": "sim-model", "max_tokens": r.maxTokens, "temperature": 0, "seed": requestSeed, "stream": stream}
	if r.ignoreEOS {
		m["ignore_eos"] = true
	}
	if r.choicesN != 1 {
		m["n"] = r.choicesN
	}
	if r.endpoint == "completions" {
		if len(r.prompts) == 1 {
			m["prompt"] = r.prompts[0]
		} else {
			m["prompt"] = r.prompts
		}
	} else {
		m["messages"] = []map[string]string{{"role": "user", "content": r.prompts[0]}}
	}
	if r.tools {
		m["tools"] = []json.RawMessage{json.RawMessage(toolSchema)}
		m["tool_choice"] = "required"
	}
	if stream && r.includeUsage {
		m["stream_options"] = map[string]bool{"include_usage": true, "continuous_usage_stats": r.continuousUsage}
	}
	return m
}

// Engine faults the plan draws from (an action listed twice is drawn twice as often).
// Crashes are the harshest: they also break the other requests running on that replica
// and keep it out for a moment; an engine 429/503 keeps new work off the replica for a
// second. error is vLLM's own failure (its error event, then [DONE]); error:nodone ends
// the stream right after the event; error:hang sends the event and then holds the stream
// open, which the gateway waits out for failover.DefaultEndGrace (5 s) before it treats
// the attempt as uncertain, so it is drawn once: each one keeps a client busy that long;
// garbage and oversize send an event the gateway cannot forward and then stay silent with
// the connection open; drop closes without a byte. Every API gets every fault, in its own
// shape (the sim's fault grammar says how); an embedding has no tokens, so its faults
// fire at accept or prefill.
var (
	actions = []string{"crash", "reset", "reset", "hang", "hang", "status:500", "status:500", "status:429", "status:503",
		"error", "error", "error:nodone", "error:nodone", "error:hang", "garbage", "garbage", "oversize", "drop", "drop"}
	points      = []string{"accept", "prefill", "computed:0", "computed:2", "sent:0", "sent:1", "sent:3", "sent:6", "sent:14", "computed:22", "sent:30"}
	embedPoints = []string{"accept", "prefill"}
)

// Shares of the plan's APIs, request shapes and client behaviours.
const (
	shareMessages   = 0.17 // the Anthropic Messages API
	shareResponses  = 0.20 // the OpenAI Responses API
	shareEmbeddings = 0.07 // embeddings, on the embedding pool
	// The rest are chat and text completions, shaped as follows.
	shareChatN2       = 0.10 // chat with n = 2
	shareCompletions  = 0.08 // a text completion
	sharePromptArray  = 0.08 // a completion with two prompts
	sharePromptArrayN = 0.03 // two prompts and n = 2: four choices
	shareTools        = 0.06 // chat answered with a tool call
	shareUsage        = 0.12 // the client asks for usage
	shareContinuous   = 0.08 // the client asks for usage in every chunk
	// Messages and Responses requests.
	shareStreamed = 0.70 // streamed (the rest are whole answers)
	shareAPITools = 0.12 // answered with a tool call
	shareContinue = 0.35 // of the Responses requests: continue an earlier one's response
	// shareEngineTool of the other Responses requests let the engine run a tool itself (the
	// default of Config.EngineTools); shareToolPoint of their faults fire right after it ran
	// (tool:1).
	shareEngineTool = 0.25
	shareToolPoint  = 0.40
	// continueWindow is how far back a continuation looks for the response it continues:
	// near enough that its client is done or soon will be.
	continueWindow = 24
	// Embeddings.
	shareTwoInputs = 0.50 // two inputs in one request
	shareBase64    = 0.30 // vectors asked for in base64

	shareKeyed    = 0.20 // Idempotency-Key, retried after the end
	shareInflight = 0.40 // of the keyed streams: also retried while running
	shareStall    = 0.03 // the client stops reading
	shareLeave    = 0.06 // the client leaves part-way (streams only)

	// stallTokens makes a stalled client's answer large enough to fill every buffer
	// between the gateway and the client (the gateway's small send buffer, the client's
	// small receive buffer) long before the engine is done generating it, so the gateway
	// must notice the stall while the engine still runs and cancel it.
	stallTokens = 2500
	// multiChoiceMaxTokens is the sim's longest natural length: no choice is cut by it.
	multiChoiceMaxTokens = 40
	// toolMaxTokens lets a Messages or Responses tool call finish: a call cut by its token
	// limit is no call at all in their whole answers, which would test nothing.
	toolMaxTokens = 64
	// leaveEarlySlow slows a client-that-leaves-before-output's engine so that a keepalive
	// (150ms) comes before its first token (200ms at the default decode time).
	leaveEarlySlow = "slow:x100@prefill"
)

// drawPlan draws every request of a run from rng: the same seed gives the same plan.
func drawPlan(cfg Config, rng *rand.Rand) []request {
	plan := make([]request, cfg.Requests)
	for i := range plan {
		plan[i] = drawRequest(i, cfg, rng, plan[:i])
	}
	return plan
}

// drawRequest draws request i; earlier are the requests drawn before it, which a
// Responses request may continue.
func drawRequest(i int, cfg Config, rng *rand.Rand, earlier []request) request {
	prompt := fmt.Sprintf("chaos request %d of seed %d", i, cfg.Seed)
	r := request{n: i, endpoint: "chat", stream: true, prompts: []string{prompt}, choicesN: 1, maxTokens: 6 + rng.IntN(10), ignoreEOS: true,
		continues: -1, done: make(chan struct{})}
	switch x := rng.Float64(); {
	case x < shareMessages:
		r.endpoint = "messages"
	case x < shareMessages+shareResponses:
		r.endpoint = "responses"
	case x < shareMessages+shareResponses+shareEmbeddings:
		r.endpoint = "embeddings"
	}
	switch r.endpoint {
	case "chat":
		drawChatShape(&r, rng)
	case "messages", "responses":
		// Their answers stop at their natural length or at the token limit, whichever
		// comes first: neither API takes ignore_eos.
		r.ignoreEOS = false
		r.stream = rng.Float64() < shareStreamed
		if rng.Float64() < shareAPITools {
			r.tools, r.maxTokens = true, toolMaxTokens
		}
		if r.endpoint == "responses" && rng.Float64() < shareContinue {
			r.continues = continuable(earlier, rng)
		}
		if r.endpoint == "responses" && !r.tools && r.continues < 0 && rng.Float64() < cfg.EngineTools {
			r.engineTool = true
		}
	case "embeddings":
		r.stream, r.ignoreEOS = false, false
		if rng.Float64() < shareTwoInputs {
			r.prompts = append(r.prompts, prompt+", a second input")
		}
		r.base64 = rng.Float64() < shareBase64
	}
	if rng.Float64() < cfg.FaultRate {
		action := actions[rng.IntN(len(actions))]
		point, replica := points[rng.IntN(len(points))], fmt.Sprintf("sim-%d", 1+rng.IntN(cfg.Replicas))
		if r.endpoint == "embeddings" {
			point, replica = embedPoints[rng.IntN(len(embedPoints))], fmt.Sprintf("embed-%d", 1+rng.IntN(cfg.EmbedReplicas))
		}
		r.fault = fmt.Sprintf("%s@%s;on=%s", action, point, replica)
		if r.engineTool && rng.Float64() < shareToolPoint {
			// Right after the engine ran the tool, on whichever replica runs it: a rerun
			// that ran it again would show as a second call.
			r.fault = action + "@tool:1"
		}
		r.faultKind = action
	}
	if rng.Float64() < shareKeyed {
		r.key = fmt.Sprintf("chaos-%d-%d", cfg.Seed, i)
		// A whole answer has no first event to retry at while it runs.
		r.inflightRetry = rng.Float64() < shareInflight && r.stream
	}
	switch x := rng.Float64(); {
	case x < shareStall:
		// A plain chat answer, long and without a fault of its own: the one thing that
		// should end it is its client.
		r.client, r.stallAfter = clientStall, rng.IntN(4096)
		r.endpoint, r.stream, r.prompts, r.choicesN, r.tools, r.base64, r.continues = "chat", true, []string{prompt}, 1, false, false, -1
		r.engineTool = false
		r.includeUsage, r.continuousUsage = false, false
		r.maxTokens, r.ignoreEOS, r.fault, r.faultKind = stallTokens, true, "", ""
	case x < shareStall+shareLeave && r.stream:
		r.client, r.leaveAfter = clientLeave, rng.IntN(min(r.maxTokens, 15)+1)-1
		r.fault, r.faultKind = "", ""
		if r.leaveAfter < 0 {
			r.fault = leaveEarlySlow
		}
	}
	if r.continues < 0 {
		// A continuation's body names the response it continues, known only once the
		// request it continues has completed.
		r.bodyBytes = r.body(r.stream)
	}
	return r
}

// drawChatShape draws the shape of a chat or text completion request.
func drawChatShape(r *request, rng *rand.Rand) {
	prompt := r.prompts[0]
	switch x := rng.Float64(); {
	case x < shareChatN2:
		r.choicesN = 2
	case x < shareChatN2+shareCompletions:
		r.endpoint = "completions"
	case x < shareChatN2+shareCompletions+sharePromptArray:
		r.endpoint, r.prompts = "completions", []string{prompt, prompt + ", the second prompt"}
	case x < shareChatN2+shareCompletions+sharePromptArray+sharePromptArrayN:
		r.endpoint, r.prompts, r.choicesN = "completions", []string{prompt, prompt + ", the second prompt"}, 2
	case x < shareChatN2+shareCompletions+sharePromptArray+sharePromptArrayN+shareTools:
		r.tools = true
	}
	if r.choices() > 1 {
		// Natural lengths (8 to 40 tokens): the choices finish apart, and the late fault
		// points fall between their ends.
		r.maxTokens, r.ignoreEOS = multiChoiceMaxTokens, false
	}
	switch x := rng.Float64(); {
	case x < shareContinuous:
		r.includeUsage, r.continuousUsage = true, true
	case x < shareContinuous+shareUsage:
		r.includeUsage = true
	}
}

// continuable picks a recent Responses request whose response a new one may continue: a
// text answer whose client reads it whole (a response its client never saw complete has
// no id to continue). -1 when there is none.
func continuable(earlier []request, rng *rand.Rand) int {
	var candidates []int
	for j := max(0, len(earlier)-continueWindow); j < len(earlier); j++ {
		if e := &earlier[j]; e.endpoint == "responses" && !e.tools && !e.engineTool && e.client == clientNormal {
			candidates = append(candidates, j)
		}
	}
	if len(candidates) == 0 {
		return -1
	}
	return candidates[rng.IntN(len(candidates))]
}

// kinds are the labels r is counted under in the report: its fault, its client's
// behaviour and the features of its shape.
func (r *request) kinds() []string {
	var k []string
	switch {
	case r.faultKind != "":
		k = append(k, r.faultKind)
	case r.client == clientNormal:
		k = append(k, "none")
	}
	switch r.client {
	case clientStall:
		k = append(k, "stall")
	case clientLeave:
		k = append(k, "leave")
	}
	if r.engineTool {
		k = append(k, "engine-tool")
	}
	switch {
	case r.tools:
		k = append(k, "tools")
	case len(r.prompts) > 1 && r.endpoint == "embeddings":
		k = append(k, "inputs=2")
	case len(r.prompts) > 1:
		k = append(k, "prompt-array")
	}
	if !r.stream {
		k = append(k, "whole")
	}
	switch {
	case r.continueSkipped:
		k = append(k, "continue-skipped")
	case r.continues >= 0:
		k = append(k, "continues")
	}
	if r.choicesN > 1 {
		k = append(k, "n=2")
	}
	if r.key != "" {
		k = append(k, "keyed")
	}
	if r.includeUsage {
		k = append(k, "usage")
	}
	return k
}

// describe names r in a violation: its number, shape and fault.
func (r *request) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "request %d (%s", r.n, r.endpoint)
	if !r.stream {
		b.WriteString(" whole")
	}
	if r.continues >= 0 {
		fmt.Fprintf(&b, " continues %d", r.continues)
	}
	if r.choicesN > 1 {
		fmt.Fprintf(&b, " n=%d", r.choicesN)
	}
	if len(r.prompts) > 1 {
		fmt.Fprintf(&b, " prompts=%d", len(r.prompts))
	}
	if r.tools {
		b.WriteString(" tools")
	}
	if r.engineTool {
		b.WriteString(" engine-tool")
	}
	if r.base64 {
		b.WriteString(" base64")
	}
	if r.key != "" {
		b.WriteString(" keyed")
	}
	switch {
	case r.continuousUsage:
		b.WriteString(" usage=continuous")
	case r.includeUsage:
		b.WriteString(" usage")
	}
	switch r.client {
	case clientStall:
		fmt.Fprintf(&b, " stall@%dB", r.stallAfter)
	case clientLeave:
		fmt.Fprintf(&b, " leave@%d", r.leaveAfter)
	}
	if r.fault != "" {
		fmt.Fprintf(&b, " fault %q", r.fault)
	}
	b.WriteString(")")
	return b.String()
}
