package request

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
)

// tokenizeTimeout bounds the /tokenize call that counts a prompt's tokens.
const tokenizeTimeout = 500 * time.Millisecond

// bytesPerToken is the estimate of a prompt's tokens when no engine can count them: about
// four bytes of English text per token for the BPE tokenizers of current models. It is an
// estimate, used only to refuse reruns whose prefill would be too expensive.
const bytesPerToken = 4

// cost is what a rerun of the request would prefill.
type cost struct {
	// promptTokens is the prompt's size: an engine's count once it answered, the estimate
	// until then. waitCount: the first attempt waits for the count (countPromptTokens).
	promptTokens int
	waitCount    bool
}

// rerunTokenLimit is the policy's rerun cost limit in tokens (0: none): the smaller of the
// token limit and the time limit at the pool's prefill speed.
func rerunTokenLimit(cfg *config.Config) int {
	p := cfg.Policy
	limit := p.MaxRerunPrefillTokens
	if t := p.MaxRerunPrefillTime.D(); t > 0 {
		byTime := max(1, int(t.Seconds()*p.PrefillTokensPerSecond))
		if limit == 0 || byTime < limit {
			limit = byTime
		}
	}
	return limit
}

func estimateTokens(req *openai.Request) int {
	n := len(req.Prompt) + req.PromptOmitted // the prompt's whole text
	if n == 0 {
		n = len(req.Body) // prompts given as token ids, or content the parser did not render
	}
	return (n + bytesPerToken - 1) / bytesPerToken
}

// refineCost tells the machine what a rerun of this request would cost, when a rerun cost
// limit is configured: the prompt's tokens (counted by an engine, else estimated) minus the
// prefix a replica not tried yet likely has cached (it prefilled the same prompt prefix
// recently). It does no I/O: the count was asked for when the request started.
func (rn *Run) refineCost() {
	rn.owner.check()
	if rerunTokenLimit(rn.p.Config) == 0 || rn.m.Committed() {
		return
	}
	cached := rn.pool.CachedPrefix(rn.p.Affinity, rn.p.Blocks, rn.m.Attempts(), rn.now())
	rn.m.SetPromptTokens(max(0, rn.cost.promptTokens-cached/bytesPerToken))
}

// countPromptTokens asks an engine of the pool to count the prompt's tokens, in the
// background, when the rerun cost limit is configured and the estimate is too close to
// the limit to decide on: an estimate below half the limit or above twice it decides the
// same way as any count would, and costs no engine call. It reports whether it asked; the
// answer (a count, or 0 when none came within tokenizeTimeout) reaches the owner through
// its inbox, and the owner starts the first attempt only then, so that whether a rerun is
// too expensive never depends on how fast the count came back. The owner is not blocked
// meanwhile: the client leaving or a shutdown is handled as always.
func (rn *Run) countPromptTokens() bool {
	rn.owner.check()
	limit := rerunTokenLimit(rn.p.Config)
	if limit == 0 || rn.cost.promptTokens < limit/2 || rn.cost.promptTokens > 2*limit {
		return false
	}
	targets := rn.pool.Targets()
	if len(targets) == 0 {
		return false
	}
	client, req, members, box, parent := rn.srv.Engines(), rn.p.Req, rn.p.Members, rn.inbox, rn.p.R.Context()
	go func() {
		// One bound for the whole count, however many engines are asked.
		ctx, cancel := context.WithTimeout(parent, tokenizeTimeout)
		defer cancel()
		n := 0
		for _, tg := range targets {
			if count, ok := tokenize(ctx, client, tg, req.Model, members); ok {
				n = count
				break
			}
			if ctx.Err() != nil {
				break
			}
		}
		box.post(control{kind: ctlPromptTokens, tokens: n})
	}()
	return true
}

// promptCounted takes the count countPromptTokens asked for (0: none came) and starts the
// first attempt if it waited for it.
func (rn *Run) promptCounted(tokens int) {
	rn.owner.check()
	if tokens > 0 {
		rn.cost.promptTokens = tokens
	}
	if rn.cost.waitCount {
		rn.cost.waitCount = false
		rn.step(failover.Event{Kind: failover.EvStart})
	}
}

// tokenize calls vLLM's (and the simulator's) POST /tokenize with the model and the
// request's prompt or messages, as the client wrote them (members, of the request's body).
func tokenize(ctx context.Context, client *http.Client, tg Target, model string, members openai.Members) (int, bool) {
	body := tokenizeBody(model, members)
	ctx, cancel := context.WithTimeout(ctx, tokenizeTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/tokenize", body.reader())
	if err != nil {
		return 0, false
	}
	hr.ContentLength = int64(body.size())
	SetCredentials(hr.Header, tg.EngineKey, tg.AgentKey)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var out struct {
		Count int `json:"count"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out) != nil || out.Count <= 0 {
		return 0, false
	}
	return out.Count, true
}

// tokenizeBody is {"model":…,"prompt":…,"messages":…}, prompt and messages present when
// the request has them. Their values are the request body's own bytes, not copied.
func tokenizeBody(model string, members openai.Members) engineBody {
	var b engineBody
	head := append(openai.AppendString([]byte(`{"model":`), model), ',')
	prompt, hasPrompt := members.Get("prompt")
	messages, hasMessages := members.Get("messages")
	switch {
	case hasPrompt && hasMessages && len(prompt) <= len(messages):
		// Both, rarely: the smaller is copied to join them.
		b.parts = [3][]byte{append(append(append(head, `"prompt":`...), prompt...), `,"messages":`...), messages, []byte("}")}
	case hasPrompt && hasMessages:
		b.parts = [3][]byte{append(head, `"prompt":`...), prompt, append(append([]byte(`,"messages":`), messages...), '}')}
	case hasPrompt:
		b.parts = [3][]byte{append(head, `"prompt":`...), prompt, []byte("}")}
	case hasMessages:
		b.parts = [3][]byte{append(head, `"messages":`...), messages, []byte("}")}
	default:
		head[len(head)-1] = '}'
		b.parts = [3][]byte{head}
	}
	return b
}
