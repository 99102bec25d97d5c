package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/sim"
)

// journal is what GET /v1/requests/{id} says.
type journal struct {
	ID                    string           `json:"id"`
	Phase                 string           `json:"phase"`
	Outcome               string           `json:"outcome"`
	FirstDeltaSent        bool             `json:"first_delta_sent"`
	DeliveredOutputTokens int              `json:"delivered_output_tokens"`
	Error                 json.RawMessage  `json:"error"`
	Attempts              []journalAttempt `json:"attempts"`
}

type journalAttempt struct {
	ID         string    `json:"id"`
	Replica    string    `json:"replica"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	EndReason  string    `json:"end_reason"`
	Failure    string    `json:"failure"`
	CancelSent bool      `json:"cancel_sent"`
}

// answer is what one replica answers a request when asked directly, without a fault:
// with greedy decoding, a seed and ignore_eos it is the only answer that replica gives.
type answer struct {
	choices []refChoice
	vectors [][]float32 // an embeddings answer: a vector per input
	err     error
}

type refChoice struct {
	text, finish       string
	toolName, toolArgs string
}

// history is everything the checker knows about one logical request: what its client
// and its retries saw, what the journal says, what the engines recorded, and what each
// replica that served it answers. judge reads nothing else, so a history can be crafted.
type history struct {
	req        *request
	journal    journal
	journalErr error
	// records are the engines' records of the request (by X-Request-Id), oldest first.
	records []sim.Record
	// answers holds the answer of every replica that served an attempt, by name.
	answers map[string]answer
	// fenced: every replica sits behind an agent; agentEnds says when the agent closed
	// the engine connection of an attempt (absent: it never said).
	fenced    bool
	agentEnds map[string]time.Time
	// toolIDShape is a tool call id in the shape each replica's engine makes them.
	toolIDShape map[string]string
	// intervals is each replica's stream interval (tokens per chunk), for the report.
	intervals map[string]int
	// writeTimeout is the gateway's client_write_timeout (0: unknown).
	writeTimeout time.Duration
	// recordOn names the replica of each engine record (by record id).
	recordOn map[string]string
	// A continuation's: producer is the replica that made the response it continues, at
	// producedAt (when that request's last attempt ended). crashes, overloads and cuts
	// are when each replica crashed, refused work as overloaded, or had its link cut.
	producer   string
	producedAt time.Time
	// producerAttempts is how many attempts the request that made it ran.
	producerAttempts int
	// toolCalls is how many times the engines ran the request's engine-run tool: the
	// counting tool server's calls made in the sessions of the request's engine records.
	toolCalls int
	crashes   map[string][]time.Time
	overloads map[string][]time.Time
	cuts      map[string][]window
}

// checker collects the histories of a run.
type checker struct {
	clients   *clients
	plan      []request
	sims      []*sim.Server
	agents    map[string]*agent.Agent // fenced mode: each replica's agent
	fenced    bool
	toolIDs   map[string]string
	intervals map[string]int
	answers   map[string]answer // replica + body → the replica's own answer
	// served and ended are the replica that served each request of the plan (its last
	// attempt's) and when that attempt ended, as the journal says; a continuation's
	// reference answer and its pinning follow from them.
	served   map[int]string
	ended    map[int]time.Time
	attempts map[int]int // how many attempts each request of the plan had
	// crashes, overloads and cuts are each replica's crashes, overload refusals and cut
	// links over the whole run (see history).
	crashes, overloads map[string][]time.Time
	cuts               map[string][]window
	// held lists, by replica, the attempts its agent held under a lease.
	held map[string]map[string]bool
	// tools is the counting MCP server of the engines' engine-run tool (nil: none).
	tools *sim.ToolServer
}

// KindStats counts the requests of one kind (a fault, a client behaviour, a request
// shape) and those of them whose history broke the contract.
type KindStats struct {
	Requests  int
	Violating int
	Rules     map[string]int // violations of each rule among them
	Endings   map[string]int // what their clients saw: completed, rerun-completed, interrupted, failed, left, stalled
}

func (c *checker) check(ctx context.Context, plan []request) Report {
	rep := Report{Requests: len(plan), ByFault: map[string]int{}, FailCodes: map[string]int{}, ByKind: map[string]*KindStats{}, ByRule: map[string]int{},
		ByAPI: map[string]*APIStats{}}
	c.plan, c.served, c.ended, c.attempts = plan, map[int]string{}, map[int]time.Time{}, map[int]int{}
	c.learnReplicas()
	for i := range plan {
		r := &plan[i]
		h := c.collect(ctx, r)
		outcome, violations := judge(h)
		c.served[i], c.attempts[i] = h.served(), len(h.journal.Attempts)
		if n := len(h.journal.Attempts); n > 0 {
			c.ended[i] = h.journal.Attempts[n-1].EndedAt
		}
		rep.countAPI(r, outcome, len(violations) > 0)
		rep.countContinuation(r, outcome)
		for _, k := range h.kinds() {
			if rep.ByKind[k] == nil {
				rep.ByKind[k] = &KindStats{Rules: map[string]int{}, Endings: map[string]int{}}
			}
			ks := rep.ByKind[k]
			ks.Requests++
			if outcome != "" {
				ks.Endings[outcome]++
			}
			if len(violations) > 0 {
				ks.Violating++
			}
			for _, v := range violations {
				ks.Rules[v.rule]++
			}
		}
		kind := r.faultKind
		if kind == "" {
			kind = "none"
		}
		rep.ByFault[kind]++
		if code := errorCode(r.seen); code != "" {
			rep.FailCodes[code]++
		}
		for _, v := range violations {
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s %s: %s", r.describe(), r.seen.requestID, v))
			rep.ByRule[v.rule]++
			rep.Found = append(rep.Found, Finding{Request: i, Describe: r.describe() + " " + r.seen.requestID, API: apiName(r), Outcome: outcome, Rule: v.rule, Text: v.text,
				Attempts: len(h.journal.Attempts), ContinuesStreamRerun: r.prevID != "" && plan[r.continues].stream && c.attempts[r.continues] > 1})
		}
		switch outcome {
		case "completed":
			rep.Completed++
		case "rerun-completed":
			rep.Completed++
			rep.Reruns++
		case "interrupted":
			rep.Interrupted++
		case "failed":
			rep.Failed++
		case "left":
			rep.Left++
		case "stalled":
			rep.Stalled++
		}
	}
	return rep
}

// kinds are the labels the report counts h under: the request's own, plus "interval>1"
// when a replica that sends several tokens per chunk served it, and "link-timeout" when
// an attempt timed out without a hang fault on its replica (a black-holed link).
func (h *history) kinds() []string {
	k := h.req.kinds()
	interval, link := false, false
	_, faultOn, _ := strings.Cut(h.req.fault, ";on=")
	for _, a := range h.journal.Attempts {
		interval = interval || h.intervals[a.Replica] > 1
		timeout := a.EndReason == "first_token_timeout" || a.EndReason == "idle_timeout"
		link = link || (timeout && !(h.req.faultKind == "hang" && faultOn == a.Replica))
	}
	if interval {
		k = append(k, "interval>1")
	}
	if link {
		k = append(k, "link-timeout")
	}
	return k
}

// collect gathers r's history once its client is done.
func (c *checker) collect(ctx context.Context, r *request) *history {
	h := &history{req: r, fenced: c.fenced, answers: map[string]answer{}, agentEnds: map[string]time.Time{},
		toolIDShape: c.toolIDs, intervals: c.intervals, writeTimeout: clientWriteTimeout, recordOn: map[string]string{},
		crashes: c.crashes, overloads: c.overloads, cuts: c.cuts}
	if r.prevID != "" {
		h.producer, h.producedAt, h.producerAttempts = c.served[r.continues], c.ended[r.continues], c.attempts[r.continues]
	}
	id := r.seen.requestID
	if !strings.HasPrefix(id, "req_") {
		return h
	}
	h.journal, h.journalErr = c.clients.waitDone(ctx, id, 10*time.Second)
	h.records = c.records(ctx, id, h.recordOn)
	h.toolCalls = c.toolCallsOf(h.records)
	for _, a := range h.journal.Attempts {
		if _, ok := h.answers[a.Replica]; !ok {
			h.answers[a.Replica] = c.reference(ctx, a.Replica, r)
		}
	}
	if c.fenced {
		for _, rec := range h.records {
			if name := h.recordOn[rec.ID]; c.agentHeld(ctx, name, rec.AttemptID) {
				a := c.agents[name]
				if t, ok := agentEnded(a, rec.AttemptID); ok {
					h.agentEnds[rec.AttemptID] = t
				}
			}
		}
	}
	return h
}

// records returns the engines' records of request id, oldest first, after giving every
// one still running a few seconds to end: an engine may notice a closed connection a
// moment after the gateway closed it. One still running then is a zombie.
func (c *checker) records(ctx context.Context, id string, on map[string]string) []sim.Record {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var recs []sim.Record
	for _, s := range c.sims {
		for _, rec := range s.Records() {
			if rec.RequestID != id {
				continue
			}
			if rec.Outcome == "" {
				if ended, err := s.WaitRecord(ctx, func(x sim.Record) bool { return x.ID == rec.ID && x.Outcome != "" }); err == nil {
					rec = ended
				}
			}
			recs = append(recs, rec)
			on[rec.ID] = s.Name()
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Started.Before(recs[j].Started) })
	return recs
}

// learnReplicas reads, from every engine's records, when each replica crashed and when it
// refused work as overloaded; the partitions' cuts are already known.
func (c *checker) learnReplicas() {
	c.crashes, c.overloads = map[string][]time.Time{}, map[string][]time.Time{}
	if c.cuts == nil {
		c.cuts = map[string][]window{}
	}
	for _, s := range c.sims {
		for _, rec := range s.Records() {
			switch {
			case rec.Outcome == sim.OutcomeCrashed:
				c.crashes[s.Name()] = append(c.crashes[s.Name()], rec.Ended)
			case rec.Outcome == sim.OutcomeRejected, rec.Outcome == sim.OutcomeError && isOverloadFault(rec.Fault):
				c.overloads[s.Name()] = append(c.overloads[s.Name()], rec.Ended)
			}
		}
	}
}

// conversation is the chat r's engine renders: its prompt as a user message, after, for a
// continuation, the conversation it continues and that conversation's answer (as the
// replica that made it stored it).
func (c *checker) conversation(r *request) []sim.Message {
	var msgs []sim.Message
	if r.prevID != "" {
		prev := &c.plan[r.continues]
		msgs = c.conversation(prev)
		if text := textAnswer(c.served[prev.n], prev, msgs).choices[0].text; text != "" {
			msgs = append(msgs, sim.Message{Role: "assistant", Content: text})
		}
	}
	return append(msgs, sim.Message{Role: "user", Content: r.prompts[0]})
}

// reference is the answer replica gives r. A text answer is the sim's documented function
// of its name, the prompt and the seed (choice j of a prompt is sampled with seed + j, and
// stops at its natural length unless ignore_eos runs it to max_tokens); the Messages and
// Responses APIs are chat underneath, so their text is chat's for the same conversation;
// a vector is the sim's function of its name and the input; a tool call is asked of the
// replica itself, directly and without a fault, on its chat endpoint.
func (c *checker) reference(ctx context.Context, replica string, r *request) answer {
	switch {
	case r.endpoint == "embeddings":
		var a answer
		for _, p := range r.prompts {
			a.vectors = append(a.vectors, sim.Embedding(replica, p, embeddingDim))
		}
		return a
	case !r.tools:
		return textAnswer(replica, r, c.conversation(r))
	}
	path, body := r.path(), r.body(false)
	if r.endpoint == "messages" || r.endpoint == "responses" {
		// Chat's request for the same conversation and call; no seed, as theirs have none.
		m := map[string]any{"model": "sim-model", "max_tokens": r.maxTokens, "temperature": 0, "stream": false,
			"messages": c.conversation(r), "tools": []json.RawMessage{json.RawMessage(toolSchema)}, "tool_choice": "required"}
		b, err := json.Marshal(m)
		if err != nil {
			return answer{err: err}
		}
		path, body = "/v1/chat/completions", b
	}
	key := replica + "\x00" + path + "\x00" + string(body)
	if a, ok := c.answers[key]; ok {
		return a
	}
	a := c.askReplica(ctx, replica, path, body)
	c.answers[key] = a
	return a
}

// embeddingDim is the length of the sim's vectors (its default).
const embeddingDim = 384

func (c *checker) askReplica(ctx context.Context, replica, path string, body []byte) answer {
	var url string
	for _, s := range c.sims {
		if s.Name() == replica {
			url = s.URL()
		}
	}
	if url == "" {
		return answer{err: fmt.Errorf("no replica %s", replica)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.clients.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Index   int    `json:"index"`
			Text    string `json:"text"`
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		return answer{err: fmt.Errorf("%s answers %d", replica, resp.StatusCode)}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return answer{err: err}
	}
	a := answer{choices: make([]refChoice, len(out.Choices))}
	for _, ch := range out.Choices {
		if ch.Index < 0 || ch.Index >= len(a.choices) {
			return answer{err: fmt.Errorf("%s answers choice %d of %d", replica, ch.Index, len(out.Choices))}
		}
		rc := refChoice{text: ch.Text + ch.Message.Content, finish: ch.FinishReason}
		if len(ch.Message.ToolCalls) > 0 {
			rc.toolName, rc.toolArgs = ch.Message.ToolCalls[0].Function.Name, ch.Message.ToolCalls[0].Function.Arguments
		}
		a.choices[ch.Index] = rc
	}
	return a
}

// textAnswer is the answer a replica gives a request for text, conv being the chat it
// renders (for chat, Messages and Responses; completions render their prompts as they are).
func textAnswer(replica string, r *request, conv []sim.Message) answer {
	var a answer
	prompts := r.prompts
	if r.endpoint != "completions" {
		prompts = []string{sim.RenderChat(conv)}
	}
	for _, p := range prompts {
		for j := range r.choicesN {
			seed := r.seed() + int64(j)
			n, finish := r.maxTokens, "length"
			if natural := sim.NaturalLength(replica, seed, p); !r.ignoreEOS && natural < n {
				n, finish = natural, "stop"
			}
			a.choices = append(a.choices, refChoice{text: strings.Join(sim.Tokens(replica, seed, p, n), ""), finish: finish})
		}
	}
	return a
}

// agentHeld reports whether the agent of replica held attempt under a lease (it is
// running there or ended there): a request the agent passes through without a lease never
// ends there, so waiting for its end would only wait. The agent registers each attempt as
// it arrives, so once the run is over one listing of each agent's attempts says it.
func (c *checker) agentHeld(ctx context.Context, replica, attempt string) bool {
	a := c.agents[replica]
	if a == nil {
		return false
	}
	if c.held == nil {
		c.held = map[string]map[string]bool{}
	}
	if c.held[replica] == nil {
		c.held[replica] = map[string]bool{}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+agent.PathAttempts+"?ended=1", nil)
		if err != nil {
			return false
		}
		resp, err := c.clients.client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list agent.AttemptList
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
			return false
		}
		for _, info := range list.Attempts {
			c.held[replica][info.Attempt] = true
		}
	}
	return c.held[replica][attempt]
}

// agentEnded is when the agent closed the engine connection of an attempt.
func agentEnded(a *agent.Agent, attempt string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := a.WaitEnded(ctx, attempt)
	if err != nil || info.EndedAt.IsZero() {
		return time.Time{}, false
	}
	return info.EndedAt, true
}

// errorCode is the code of the error the client got, if any: of an error answer, or of a
// stream's final error event (a Responses stream's error event comes before its
// response.failed).
func errorCode(s seen) string {
	if s.status != http.StatusOK && s.status != 0 {
		var ch chunk
		if json.Unmarshal(s.raw, &ch) == nil && ch.Error != nil {
			return ch.Error.Code
		}
		return fmt.Sprintf("status_%d", s.status)
	}
	for i := len(s.events) - 1; i >= 0 && i >= len(s.events)-2; i-- {
		var ch chunk
		if json.Unmarshal([]byte(s.events[i]), &ch) == nil && ch.Error != nil {
			return ch.Error.Code
		}
	}
	return ""
}

// toolCallsOf counts the calls of the engine-run tool made for records: vLLM opens a tool
// server session per engine request, named by its id (x-session-id).
func (c *checker) toolCallsOf(records []sim.Record) int {
	if c.tools == nil {
		return 0
	}
	ids := map[string]bool{}
	for _, rec := range records {
		ids[rec.ID] = true
	}
	n := 0
	for _, call := range c.tools.Actions() {
		if ids[call.Session] {
			n++
		}
	}
	return n
}
