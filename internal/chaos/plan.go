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
	n        int
	endpoint string   // "chat" or "completions"
	prompts  []string // the chat prompt, or the completion prompt(s): an array when more than one
	choicesN int      // the request's n
	// maxTokens bounds every choice; with ignoreEOS every text choice has exactly this many
	// tokens, without it each stops at its own natural length, so that the choices of one
	// answer finish at different times and a fault can cut some after others finished.
	maxTokens int
	ignoreEOS bool
	// includeUsage and continuousUsage are the client's own stream_options.
	includeUsage, continuousUsage bool
	tools                         bool   // tool_choice "required": every choice is one tool call
	fault                         string // X-Sim-Fault, "" for none
	faultKind                     string // the label the report counts the fault under
	// key is the Idempotency-Key ("" for none). A keyed request is sent again with the
	// same key and body once its client has seen the end (or left); inflightRetry also
	// sends it once while the original runs.
	key           string
	inflightRetry bool
	client        clientKind
	leaveAfter    int
	stallAfter    int

	bodyBytes []byte // the streaming request body, the same bytes for every retry
	seen      seen
	inflight  *seen // the retry sent while the original ran
	retry     *seen // the retry sent after the original ended
}

// choices is the number of choices of the answer: prompts × n.
func (r *request) choices() int { return len(r.prompts) * r.choicesN }

// path is the gateway (and engine) path of r's endpoint.
func (r *request) path() string {
	if r.endpoint == "completions" {
		return "/v1/completions"
	}
	return "/v1/chat/completions"
}

// requestSeed is the sampling seed of every request.
const requestSeed = 7

// toolSchema is the one function of a tool-calling request.
const toolSchema = `{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}`

// body is r's request body, streaming or not. Greedy decoding with a fixed seed makes
// every replica's answer a pure function of the body, which is what lets the checker know
// the answer a replica must have streamed.
func (r *request) body(stream bool) []byte {
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
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // maps of strings, numbers and raw JSON always encode
	}
	return b
}

// Engine faults the plan draws from (an action listed twice is drawn twice as often).
// Crashes are the harshest: they also break the other requests running on that replica
// and keep it out for a moment; an engine 429/503 keeps new work off the replica for a
// second. error is vLLM's own failure (its error event, then [DONE]); error:nodone ends
// the stream right after the event; garbage and oversize send an event the gateway cannot
// forward and then stay silent with the connection open; drop closes without a byte.
var (
	actions = []string{"crash", "reset", "reset", "hang", "hang", "status:500", "status:500", "status:429", "status:503",
		"error", "error", "error:nodone", "error:nodone", "garbage", "garbage", "oversize", "drop", "drop"}
	points = []string{"accept", "prefill", "computed:0", "computed:2", "sent:0", "sent:1", "sent:3", "sent:6", "sent:14", "computed:22", "sent:30"}
)

// Shares of the plan's request shapes and client behaviours.
const (
	shareChatN2       = 0.10 // chat with n = 2
	shareCompletions  = 0.08 // a text completion
	sharePromptArray  = 0.08 // a completion with two prompts
	sharePromptArrayN = 0.03 // two prompts and n = 2: four choices
	shareTools        = 0.06 // chat answered with a tool call
	shareUsage        = 0.12 // the client asks for usage
	shareContinuous   = 0.08 // the client asks for usage in every chunk
	shareKeyed        = 0.20 // Idempotency-Key, retried after the end
	shareInflight     = 0.40 // of the keyed: also retried while running
	shareStall        = 0.03 // the client stops reading
	shareLeave        = 0.06 // the client leaves part-way

	// stallTokens makes a stalled client's answer large enough to fill every buffer
	// between the gateway and the client (the gateway's small send buffer, the client's
	// small receive buffer) long before the engine is done generating it, so the gateway
	// must notice the stall while the engine still runs and cancel it.
	stallTokens = 2500
	// multiChoiceMaxTokens is the sim's longest natural length: no choice is cut by it.
	multiChoiceMaxTokens = 40
	// leaveEarlySlow slows a client-that-leaves-before-output's engine so that a keepalive
	// (150ms) comes before its first token (200ms at the default decode time).
	leaveEarlySlow = "slow:x100@prefill"
)

// drawPlan draws every request of a run from rng: the same seed gives the same plan.
func drawPlan(cfg Config, rng *rand.Rand) []request {
	plan := make([]request, cfg.Requests)
	for i := range plan {
		plan[i] = drawRequest(i, cfg, rng)
	}
	return plan
}

func drawRequest(i int, cfg Config, rng *rand.Rand) request {
	prompt := fmt.Sprintf("chaos request %d of seed %d", i, cfg.Seed)
	r := request{n: i, endpoint: "chat", prompts: []string{prompt}, choicesN: 1, maxTokens: 6 + rng.IntN(10), ignoreEOS: true}
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
	if rng.Float64() < cfg.FaultRate {
		action := actions[rng.IntN(len(actions))]
		r.fault = fmt.Sprintf("%s@%s;on=sim-%d", action, points[rng.IntN(len(points))], 1+rng.IntN(cfg.Replicas))
		r.faultKind = action
	}
	if rng.Float64() < shareKeyed {
		r.key = fmt.Sprintf("chaos-%d-%d", cfg.Seed, i)
		r.inflightRetry = rng.Float64() < shareInflight
	}
	switch x := rng.Float64(); {
	case x < shareStall:
		// A plain chat answer, long and without a fault of its own: the one thing that
		// should end it is its client.
		r.client, r.stallAfter = clientStall, rng.IntN(4096)
		r.endpoint, r.prompts, r.choicesN, r.tools = "chat", []string{prompt}, 1, false
		r.maxTokens, r.ignoreEOS, r.fault, r.faultKind = stallTokens, true, "", ""
	case x < shareStall+shareLeave:
		r.client, r.leaveAfter = clientLeave, rng.IntN(min(r.maxTokens, 15)+1)-1
		r.fault, r.faultKind = "", ""
		if r.leaveAfter < 0 {
			r.fault = leaveEarlySlow
		}
	}
	r.bodyBytes = r.body(true)
	return r
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
	switch {
	case r.tools:
		k = append(k, "tools")
	case len(r.prompts) > 1:
		k = append(k, "prompt-array")
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
	if r.choicesN > 1 {
		fmt.Fprintf(&b, " n=%d", r.choicesN)
	}
	if len(r.prompts) > 1 {
		fmt.Fprintf(&b, " prompts=%d", len(r.prompts))
	}
	if r.tools {
		b.WriteString(" tools")
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
