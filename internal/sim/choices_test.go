package sim

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// streamEvents runs one streamed request and returns its events.
func streamEvents(t *testing.T, s *Server, path string, body map[string]any, header map[string]string) []string {
	t.Helper()
	body["stream"] = true
	o := observe(testContext(t), newClient(t), newPost(t, testContext(t), s.URL()+path, jsonBody(t, body), header), nil)
	if o.err != nil || o.status != http.StatusOK {
		t.Fatalf("stream: status %d, err %v, body %s", o.status, o.err, o.body)
	}
	return o.events
}

// chunkChoice is the one choice of a chunk, decoded loosely.
type chunkChoice struct {
	Index        int     `json:"index"`
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Delta        *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
}

type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeChunk(t *testing.T, ev string) chunk {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(ev), &c); err != nil {
		t.Fatalf("chunk %q: %v", ev, err)
	}
	return c
}

// textOf returns a chunk choice's text (completions) or delta content (chat).
func (c chunkChoice) textOf() (string, bool) {
	if c.Text != nil {
		return *c.Text, true
	}
	if c.Delta != nil && c.Delta.Content != nil && c.Delta.Role == nil {
		return *c.Delta.Content, true
	}
	return "", false
}

// streamedChoices collects, per choice index, its text and finish reason,
// and checks that no chunk of a choice comes after its finish chunk.
func streamedChoices(t *testing.T, events []string) (texts map[int]string, reasons map[int]string) {
	t.Helper()
	texts, reasons = map[int]string{}, map[int]string{}
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		for _, ch := range decodeChunk(t, ev).Choices {
			if _, done := reasons[ch.Index]; done {
				t.Errorf("choice %d: a chunk after its finish chunk: %s", ch.Index, ev)
			}
			if ch.FinishReason != nil {
				reasons[ch.Index] = *ch.FinishReason
				continue
			}
			if text, ok := ch.textOf(); ok {
				texts[ch.Index] += text
			}
		}
	}
	return texts, reasons
}

func TestChatStreamNChoicesInterleaved(t *testing.T) {
	s := startSim(t, Config{Name: "n"})
	const n, maxTokens = 3, 4
	events := streamEvents(t, s, "/v1/chat/completions", chatRequest("many answers", map[string]any{
		"n": n, "max_tokens": maxTokens, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true},
	}), nil)
	// n role chunks, n×maxTokens tokens, n finish chunks, usage, [DONE].
	if len(events) != n+n*maxTokens+n+2 {
		t.Fatalf("%d events, want %d: %q", len(events), n+n*maxTokens+n+2, events)
	}
	// vLLM sends every choice's role first, then each engine step's token
	// of every choice in index order; a choice's finish chunk follows its
	// last token.
	var order []string
	for _, ev := range events[:len(events)-2] {
		ch := decodeChunk(t, ev).Choices[0]
		kind := "t"
		switch {
		case ch.Delta != nil && ch.Delta.Role != nil:
			kind = "r"
		case ch.FinishReason != nil:
			kind = "f"
		}
		order = append(order, kind+string(rune('0'+ch.Index)))
	}
	want := "r0 r1 r2 t0 t1 t2 t0 t1 t2 t0 t1 t2 t0 f0 t1 f1 t2 f2"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("chunk order\n got %s\nwant %s", got, want)
	}
	prompt := RenderChat([]Message{{Role: "user", Content: "many answers"}})
	texts, reasons := streamedChoices(t, events)
	for j := range n {
		if wantText := strings.Join(Tokens("n", int64(j), prompt, maxTokens), ""); texts[j] != wantText {
			t.Errorf("choice %d = %q, want Tokens with seed %d: %q", j, texts[j], j, wantText)
		}
		if reasons[j] != "length" {
			t.Errorf("choice %d finish_reason = %q", j, reasons[j])
		}
	}
	if texts[0] == texts[1] || texts[1] == texts[2] || texts[0] == texts[2] {
		t.Errorf("choices are not all different: %v", texts)
	}
	u := decodeChunk(t, events[len(events)-2])
	promptTokens := len(tokenIDs(prompt))
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != promptTokens || u.Usage.CompletionTokens != n*maxTokens || u.Usage.TotalTokens != promptTokens+n*maxTokens {
		t.Errorf("usage chunk = %s, want the prompt once and the tokens of all choices", events[len(events)-2])
	}
	rec := waitRecord(t, s, ended)
	if rec.Choices != n || rec.TokensComputed != n*maxTokens || rec.TokensSent != n*maxTokens || rec.Outcome != OutcomeFinished || rec.PromptTokens != promptTokens {
		t.Errorf("record = %+v", rec)
	}
}

func TestChatNChoicesStopOnTheirOwn(t *testing.T) {
	s := startSim(t, Config{Name: "n"})
	const n = 4
	prompt := RenderChat([]Message{{Role: "user", Content: "stop when you like"}})
	events := streamEvents(t, s, "/v1/chat/completions", chatRequest("stop when you like", map[string]any{"n": n, "max_tokens": 1000, "seed": 7}), nil)
	texts, reasons := streamedChoices(t, events)
	total := 0
	for j := range n {
		natural := NaturalLength("n", 7+int64(j), prompt)
		total += natural
		if want := strings.Join(Tokens("n", 7+int64(j), prompt, natural), ""); texts[j] != want || reasons[j] != "stop" {
			t.Errorf("choice %d = %q (%s), want %q (stop)", j, texts[j], reasons[j], want)
		}
	}
	if rec := waitRecord(t, s, ended); rec.TokensSent != total {
		t.Errorf("record sent %d tokens, want %d over all choices", rec.TokensSent, total)
	}
	m := scrape(t, s)
	if got := metricValue(t, m, "vllm:request_success_total", `finished_reason="stop"`); got != n {
		t.Errorf("request_success{stop} = %v, want %d: one per choice, as vLLM counts child requests", got, n)
	}
	if got := metricValue(t, m, "vllm:generation_tokens_total"); got != float64(total) {
		t.Errorf("generation_tokens_total = %v, want %d", got, total)
	}
}

func TestChatNChoicesNonStream(t *testing.T) {
	s := startSim(t, Config{Name: "n"})
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions",
		jsonBody(t, chatRequest("two please", map[string]any{"n": 2, "max_tokens": 2, "ignore_eos": true})), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	compareBody(t, "vllm_chat_n2.json", b)
	var got struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	prompt := RenderChat([]Message{{Role: "user", Content: "two please"}})
	for j, ch := range got.Choices {
		if want := strings.Join(Tokens("n", int64(j), prompt, 2), ""); ch.Index != j || ch.Message.Content != want {
			t.Errorf("choice %d = %+v, want index %d and %q", j, ch, j, want)
		}
	}
	if rec := waitRecord(t, s, ended); rec.TokensSent != 4 || rec.Choices != 2 {
		t.Errorf("record = %+v", rec)
	}
}

func TestChatStreamN2MatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	compareStream(t, "vllm_chat_stream_n2.sse", streamEvents(t, s, "/v1/chat/completions", chatRequest("Hello", map[string]any{
		"n": 2, "max_tokens": 2, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true},
	}), nil))
}

func TestCompletionsPromptArrays(t *testing.T) {
	s := startSim(t, Config{Name: "p"})
	prompts := []string{"The sky is", "Grass is"}
	body := map[string]any{"model": "sim-model", "prompt": prompts, "n": 2, "max_tokens": 3, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true}}
	events := streamEvents(t, s, "/v1/completions", body, nil)
	texts, reasons := streamedChoices(t, events)
	for p, prompt := range prompts {
		for j := range 2 {
			i := p*2 + j // vLLM: output.index + prompt_idx * num_choices
			if want := strings.Join(Tokens("p", int64(j), prompt, 3), ""); texts[i] != want || reasons[i] != "length" {
				t.Errorf("choice %d = %q (%s), want prompt %d choice %d: %q", i, texts[i], reasons[i], p, j, want)
			}
		}
	}
	u := decodeChunk(t, events[len(events)-2])
	if u.Usage == nil || u.Usage.PromptTokens != 5 || u.Usage.CompletionTokens != 12 {
		t.Errorf("usage = %s, want prompts summed (3+2) and 4 choices × 3 tokens", events[len(events)-2])
	}
	delete(body, "stream_options")
	body["stream"] = false
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/completions", jsonBody(t, body), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var got struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(b, &got)
	for i, ch := range got.Choices {
		if ch.Index != i || ch.Text != texts[i] {
			t.Errorf("non-stream choice %d = %+v, want the streamed text %q", i, ch, texts[i])
		}
	}
	if len(got.Choices) != 4 {
		t.Errorf("%d choices, want 4", len(got.Choices))
	}
}

func TestCompletionsPromptArraysMatchVLLM(t *testing.T) {
	s := startSim(t, Config{})
	body := map[string]any{"model": "sim-model", "prompt": []string{"The sky is", "Grass is"}, "n": 2, "max_tokens": 1, "ignore_eos": true,
		"stream_options": map[string]any{"include_usage": true}}
	compareStream(t, "vllm_completions_stream_2prompts_n2.sse", streamEvents(t, s, "/v1/completions", body, nil))
	delete(body, "stream_options")
	body["stream"] = false
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/completions", jsonBody(t, body), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	compareBody(t, "vllm_completions_2prompts_n2.json", b)
}

func TestCompletionsTokenIDPrompts(t *testing.T) {
	s := startSim(t, Config{Name: "ids"})
	cases := []struct {
		prompt any
		ids    [][]int
	}{
		{[]int{5, 6, 7}, [][]int{{5, 6, 7}}}, // one array of ids is one prompt
		{[][]int{{1, 2}, {300, 400, 500, 600}}, [][]int{{1, 2}, {300, 400, 500, 600}}},
		{[]any{"mixed text", []int{9}}, nil}, // strings and id arrays in one list
	}
	for _, c := range cases {
		status, b := postJSON(t, newClient(t), s.URL()+"/v1/completions",
			jsonBody(t, map[string]any{"model": "sim-model", "prompt": c.prompt, "max_tokens": 2, "ignore_eos": true}), nil)
		if status != http.StatusOK {
			t.Fatalf("%v: status %d: %s", c.prompt, status, b)
		}
		var got struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(b, &got)
		if c.ids == nil {
			if len(got.Choices) != 2 || got.Usage.PromptTokens != 3 {
				t.Errorf("mixed list: %s", b)
			}
			continue
		}
		promptTokens := 0
		for i, ids := range c.ids {
			promptTokens += len(ids)
			if want := strings.Join(Tokens("ids", 0, TokenPrompt(ids), 2), ""); got.Choices[i].Text != want {
				t.Errorf("prompt %v: %q, want %q", ids, got.Choices[i].Text, want)
			}
		}
		if len(got.Choices) != len(c.ids) || got.Usage.PromptTokens != promptTokens {
			t.Errorf("%v: %s", c.prompt, b)
		}
	}
}

func TestNChoicesShareThePromptInTheCache(t *testing.T) {
	s := startSim(t, Config{})
	content := strings.Repeat("lorem ipsum dolor sit amet ", 20) // 105 tokens rendered
	postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(content, map[string]any{"n": 3, "max_tokens": 1})), nil)
	// The first choice computes the whole prompt; the other two find its
	// 6 full blocks (96 tokens) cached, as vLLM's child requests do.
	if rec := waitRecord(t, s, ended); rec.CachedTokens != 2*96 || rec.PromptTokens != 105 {
		t.Errorf("record = %+v, want 192 cached tokens and the prompt counted once", rec)
	}
}

func TestNChoicesHoldOneSlotEach(t *testing.T) {
	s := startSim(t, Config{MaxRunning: 4})
	progress := make(chan int, 100)
	done := make(chan observation, 1)
	body := jsonBody(t, chatRequest("slots", map[string]any{"n": 3, "stream": true, "max_tokens": 4}))
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", body, map[string]string{"X-Sim-Fault": "hang@sent:0"})
	ctx, cancel := contextWithCancel(t)
	go func() { done <- observe(ctx, newClient(t), req, progress) }()
	waitProgress(t, progress, 4) // three roles and the first token
	if got := metricValue(t, scrape(t, s), "vllm:num_requests_running"); got != 3 {
		t.Errorf("num_requests_running = %v, want 3: one per choice", got)
	}
	cancel()
	<-done
}

func TestSchedulerSlotsFIFO(t *testing.T) {
	sched := newScheduler(4, 0)
	big, _ := sched.enqueueSlots(3)
	if !big.granted {
		t.Fatal("3 of 4 free slots were not granted")
	}
	wide, _ := sched.enqueueSlots(2) // does not fit beside big
	small, _ := sched.enqueueSlots(1)
	if wide.granted || small.granted {
		t.Fatal("a request overtook the queue: FIFO admits in order even when a later one would fit")
	}
	if running, waiting, _ := sched.load(); running != 3 || waiting != 3 {
		t.Errorf("running %d, waiting %d; want 3 and 3 (sequences, as vLLM counts)", running, waiting)
	}
	sched.releaseSlots(big.slots)
	if !wide.granted || !small.granted {
		t.Error("freed slots were not handed on in order")
	}
	huge, _ := sched.enqueueSlots(10) // more than MaxRunning: takes them all
	if huge.slots != 4 || huge.granted {
		t.Errorf("huge ticket = %+v, want 4 slots, waiting", huge)
	}
	sched.releaseSlots(wide.slots)
	sched.releaseSlots(small.slots)
	if !huge.granted {
		t.Error("huge ticket not granted once the scheduler was empty")
	}
}

func TestSentFaultCountsAcrossChoices(t *testing.T) {
	s := startSim(t, Config{})
	// sent:3 is the request's 4th token: roles, then tokens 0 of choices 0
	// and 1, then tokens 1 of choices 0 and 1.
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions",
		jsonBody(t, chatRequest("x", map[string]any{"n": 2, "stream": true, "max_tokens": 5, "ignore_eos": true})), map[string]string{"X-Sim-Fault": "status:500@sent:3"})
	o := observe(testContext(t), newClient(t), req, nil)
	if len(o.events) != 2+4+1 {
		t.Fatalf("events = %q, want 2 roles, 4 tokens, the error", o.events)
	}
	if rec := s.Records()[0]; rec.TokensSent != 4 || rec.TokensComputed != 4 {
		t.Errorf("record = %+v", rec)
	}
}

func TestTokenPromptIsDistinct(t *testing.T) {
	if TokenPrompt([]int{1, 2}) == TokenPrompt([]int{12}) || TokenPrompt([]int{1, 2}) == "1 2" {
		t.Error("TokenPrompt keys collide")
	}
	if !reflect.DeepEqual(Tokens("a", 0, TokenPrompt([]int{1}), 3), Tokens("a", 0, TokenPrompt([]int{1}), 3)) {
		t.Error("TokenPrompt is not deterministic")
	}
}
