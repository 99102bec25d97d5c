package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// responsesValueKeys are the keys whose values a Responses event or body
// must share with vLLM's.
var responsesValueKeys = keys("type", "sequence_number", "output_index", "content_index", "status", "object", "role")

// responseBodyJSON decodes the parts of a response object the tests read.
type responseBodyJSON struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Status             string  `json:"status"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		Args    string `json:"arguments"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeResponse(t *testing.T, b []byte) responseBodyJSON {
	t.Helper()
	var r responseBodyJSON
	if err := json.Unmarshal(b, &r); err != nil || r.Object != "response" {
		t.Fatalf("not a response object: %s (%v)", b, err)
	}
	return r
}

// text is the response's output text.
func (r responseBodyJSON) text() string {
	var b strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func postResponses(t *testing.T, s *Server, body map[string]any, header map[string]string) (int, []byte) {
	t.Helper()
	return postJSON(t, newClient(t), s.URL()+"/v1/responses", jsonBody(t, body), header)
}

func TestResponsesWholeMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	status, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Hi", "instructions": "Answer briefly.", "max_output_tokens": 3}, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	compareBodyValues(t, "vllm_responses.json", body, responsesValueKeys)
	r := decodeResponse(t, body)
	prompt := RenderChat([]Message{{Role: "system", Content: "Answer briefly."}, {Role: "user", Content: "Hi"}})
	if want := strings.Join(Tokens("sim", 0, prompt, 3), ""); r.text() != want {
		t.Errorf("text %q, want %q", r.text(), want)
	}
	if !strings.HasPrefix(r.ID, "resp_") || !isHex32(r.ID[len("resp_"):]) || !strings.HasPrefix(r.Output[0].ID, "msg_") || !isHex32(r.Output[0].ID[len("msg_"):]) {
		t.Errorf("ids %q, %q", r.ID, r.Output[0].ID)
	}
	if u := r.Usage; u.InputTokens != len(tokenIDs(prompt)) || u.OutputTokens != 3 || u.TotalTokens != u.InputTokens+3 {
		t.Errorf("usage %+v", u)
	}
	if rec := s.Records()[0]; rec.Endpoint != "responses" || rec.ID != r.ID || rec.Outcome != OutcomeFinished || rec.TokensSent != 3 {
		t.Errorf("record = %+v", rec)
	}
}

func TestResponsesStreamMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	req := newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, map[string]any{"model": "sim-model", "input": "Hi", "max_output_tokens": 2, "stream": true}), nil)
	o := observeNamed(testContext(t), newClient(t), req, nil)
	if o.err != nil || o.status != http.StatusOK {
		t.Fatalf("status %d, err %v", o.status, o.err)
	}
	compareNamedStream(t, "vllm_responses_stream.sse", o.events, responsesValueKeys)
	want := Tokens("sim", 0, RenderChat([]Message{{Role: "user", Content: "Hi"}}), 2)
	var itemID string
	for i, ev := range o.events {
		var d struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
			Item  struct {
				ID string `json:"id"`
			} `json:"item"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Type != ev.name {
			t.Errorf("event %d: data type %q under event %q (%v)", i, d.Type, ev.name, err)
		}
		switch ev.name {
		case "response.output_item.added":
			itemID = d.Item.ID
		case "response.output_text.delta":
			if d.Delta != want[i-4] {
				t.Errorf("delta %d = %q, want %q", i-4, d.Delta, want[i-4])
			}
		case "response.completed":
			r := decodeResponse(t, d.Response)
			// vLLM builds the completed response afresh: its item has its
			// own "msg_" id, not the stream's.
			if r.Output[0].ID == itemID || !strings.HasPrefix(r.Output[0].ID, "msg_") || !isHex32(itemID) || r.text() != strings.Join(want, "") || r.Status != "incomplete" {
				t.Errorf("completed %s (stream item %q)", d.Response, itemID)
			}
		}
	}
	if rec := s.Records()[0]; rec.Endpoint != "responses" || !rec.Stream || rec.TokensSent != 2 || rec.Outcome != OutcomeFinished {
		t.Errorf("record = %+v", rec)
	}
}

// TestResponsesTextEqualsChat: a list input with instructions renders as
// the chat of the same messages and answers the same text.
func TestResponsesTextEqualsChat(t *testing.T) {
	s := startSim(t, Config{Name: "replica-r"})
	input := []map[string]any{
		{"role": "user", "content": "Hello"},
		{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "Hi there"}}},
		{"role": "user", "content": []map[string]any{{"type": "input_text", "text": "first"}, {"type": "input_text", "text": "second"}}},
	}
	status, body := postResponses(t, s, map[string]any{"model": "sim-model", "instructions": "Be brief.", "input": input, "max_output_tokens": 100}, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	r := decodeResponse(t, body)
	prompt := RenderChat([]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi there"}, {Role: "user", Content: "first\nsecond"}})
	n := NaturalLength("replica-r", 0, prompt)
	if want := strings.Join(Tokens("replica-r", 0, prompt, n), ""); r.text() != want || r.Status != "completed" {
		t.Errorf("text %q (%s), want %q", r.text(), r.Status, want)
	}
	chat := map[string]any{"model": "sim-model", "max_tokens": 100, "messages": []map[string]any{
		{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"},
		{"role": "assistant", "content": "Hi there"}, {"role": "user", "content": "first\nsecond"}}}
	_, cb := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chat), nil)
	if !strings.Contains(string(cb), fmt.Sprintf(`"content":%q`, r.text())) {
		t.Errorf("chat %s, responses text %q", cb, r.text())
	}
}

func TestResponsesFunctionCall(t *testing.T) {
	s := startSim(t, Config{})
	count := []map[string]any{{"type": "function", "name": "count", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}}
	named := map[string]any{"type": "function", "name": "count"}
	t.Run("whole", func(t *testing.T) {
		status, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Count", "tools": count, "tool_choice": named, "max_output_tokens": 50}, nil)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		compareBodyValues(t, "vllm_responses_function_call.json", body, responsesValueKeys)
		r := decodeResponse(t, body)
		var args map[string]int
		if o := r.Output[0]; !strings.HasPrefix(o.CallID, "chatcmpl-tool-") || !strings.HasPrefix(o.ID, "fc_") || json.Unmarshal([]byte(o.Args), &args) != nil {
			t.Errorf("function_call %+v", o)
		}
	})
	t.Run("stream", func(t *testing.T) {
		req := newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, map[string]any{"model": "sim-model", "input": "Count", "tools": count, "tool_choice": named, "max_output_tokens": 50, "stream": true}), nil)
		o := observeNamed(testContext(t), newClient(t), req, nil)
		if o.err != nil {
			t.Fatal(o.err)
		}
		compareNamedStream(t, "vllm_responses_stream_function_call.sse", o.events, responsesValueKeys)
		var added struct {
			Item struct {
				CallID string `json:"call_id"`
			} `json:"item"`
		}
		_ = json.Unmarshal([]byte(o.events[2].data), &added)
		if !strings.HasPrefix(added.Item.CallID, "call_") || !isHex32(added.Item.CallID[len("call_"):]) {
			t.Errorf("streamed call_id %q", added.Item.CallID)
		}
	})
	t.Run("required cut short", func(t *testing.T) {
		// vLLM parses "required" output as a list of calls; cut short it
		// does not parse, and the response has no output at all.
		status, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Count", "tools": count, "tool_choice": "required", "max_output_tokens": 2}, nil)
		if r := decodeResponse(t, body); status != http.StatusOK || len(r.Output) != 0 || r.Status != "incomplete" {
			t.Errorf("%d %s", status, body)
		}
	})
}

func TestResponsesStoreContinuesConversation(t *testing.T) {
	s := startSim(t, Config{EnableResponsesStore: true})
	c := newClient(t)
	status, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Hello", "max_output_tokens": 5}, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	first := decodeResponse(t, body)

	status, got := getBody(t, c, s.URL()+"/v1/responses/"+first.ID)
	if status != http.StatusOK || string(got) != string(body) {
		t.Errorf("GET: %d %s\nwant %s", status, got, body)
	}

	// The next turn renders the previous messages and output after the new
	// instructions, then the new input.
	status, body = postResponses(t, s, map[string]any{"model": "sim-model", "input": "And then?", "instructions": "Be terse.", "previous_response_id": first.ID, "max_output_tokens": 4}, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	second := decodeResponse(t, body)
	prompt := RenderChat([]Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: first.text()}, {Role: "user", Content: "And then?"}})
	if want := strings.Join(Tokens("sim", 0, prompt, 4), ""); second.text() != want || second.Usage.InputTokens != len(tokenIDs(prompt)) || *second.PreviousResponseID != first.ID {
		t.Errorf("second turn %q (%d input tokens), want %q (%d)", second.text(), second.Usage.InputTokens, want, len(tokenIDs(prompt)))
	}

	// A streamed turn is stored as well, with the chain so far.
	req := newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, map[string]any{"model": "sim-model", "input": "More", "previous_response_id": second.ID, "max_output_tokens": 2, "stream": true}), nil)
	o := observeNamed(testContext(t), c, req, nil)
	var completed struct {
		Response json.RawMessage `json:"response"`
	}
	_ = json.Unmarshal([]byte(o.events[len(o.events)-1].data), &completed)
	third := decodeResponse(t, completed.Response)
	prompt = RenderChat([]Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: first.text()},
		{Role: "user", Content: "And then?"}, {Role: "assistant", Content: second.text()}, {Role: "user", Content: "More"}})
	if want := strings.Join(Tokens("sim", 0, prompt, 2), ""); third.text() != want {
		t.Errorf("third turn %q, want %q", third.text(), want)
	}
	if status, got := getBody(t, c, s.URL()+"/v1/responses/"+third.ID); status != http.StatusOK || string(got) != string(completed.Response) {
		t.Errorf("GET streamed: %d %s", status, got)
	}

	// store false keeps nothing.
	_, body = postResponses(t, s, map[string]any{"model": "sim-model", "input": "Hello", "max_output_tokens": 1, "store": false}, nil)
	if status, _ := getBody(t, c, s.URL()+"/v1/responses/"+decodeResponse(t, body).ID); status != http.StatusNotFound {
		t.Errorf("GET of a store=false response: %d", status)
	}
	if status, body := postJSON(t, c, s.URL()+"/v1/responses/"+first.ID+"/cancel", nil, nil); status != http.StatusBadRequest || !strings.Contains(string(body), "Cannot cancel a synchronous response.") {
		t.Errorf("cancel: %d %s", status, body)
	}

	// A restarted engine process has forgotten its responses.
	s.Crash()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	status, body = postResponses(t, s, map[string]any{"model": "sim-model", "input": "Again", "previous_response_id": first.ID}, nil)
	if status != http.StatusNotFound {
		t.Fatalf("after a restart: %d %s", status, body)
	}
	compareBodyValues(t, "vllm_responses_not_found.json", body, keys("type", "param", "code"))
	if e := decodeError(t, body); e.Error.Message != fmt.Sprintf("Response with id '%s' not found.", first.ID) {
		t.Errorf("%s", body)
	}
	if status, _ := getBody(t, c, s.URL()+"/v1/responses/"+first.ID); status != http.StatusNotFound {
		t.Errorf("GET after a restart: %d", status)
	}
}

// TestResponsesStoreOffByDefault: like vLLM without
// VLLM_ENABLE_RESPONSES_API_STORE, a replica ignores store and knows no
// previous response.
func TestResponsesStoreOffByDefault(t *testing.T) {
	s := startSim(t, Config{})
	_, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Hello", "max_output_tokens": 2, "store": true}, nil)
	id := decodeResponse(t, body).ID
	status, body := postResponses(t, s, map[string]any{"model": "sim-model", "input": "Again", "previous_response_id": id}, nil)
	if e := decodeError(t, body); status != http.StatusNotFound || e.Error.Type != "invalid_request_error" || *e.Error.Param != "response_id" {
		t.Errorf("%d %s", status, body)
	}
	if status, _ := getBody(t, newClient(t), s.URL()+"/v1/responses/"+id); status != http.StatusNotFound {
		t.Errorf("GET: %d", status)
	}
	if r := s.Records()[1]; r.Outcome != OutcomeError || r.Endpoint != "responses" {
		t.Errorf("record = %+v", r)
	}
}

func TestResponseStoreIsBounded(t *testing.T) {
	var st responseStore
	g := &generation{ctx: context.Background()}
	for i := range responsesStoreLimit + 1 {
		st.put(g, fmt.Sprint(i), &storedResponse{})
	}
	if st.get("0") != nil || st.get("1") == nil || st.get(fmt.Sprint(responsesStoreLimit)) == nil || len(st.items) != responsesStoreLimit {
		t.Errorf("store keeps %d, oldest present %v", len(st.items), st.get("0") != nil)
	}
}

func TestResponsesErrors(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 32})
	for _, c := range []struct {
		name   string
		body   string
		status int
		typ    string
		param  string
		msg    string
	}{
		{"unknown model", `{"model":"gpt-4o","input":"x"}`, 404, "NotFoundError", "model", "The model `gpt-4o` does not exist."},
		{"no input", `{"model":"sim-model"}`, 400, "Bad Request", "body.input", "'type': 'missing', 'loc': ('body', 'input')"},
		{"input a number", `{"input":3}`, 400, "Bad Request", "body.input", "Input should be a valid string"},
		{"background without store", `{"input":"x","background":true,"store":false}`, 400, "Bad Request", "body", "background can only be used when `store` is true"},
		{"background", `{"input":"x","background":true}`, 400, "invalid_request_error", "background", "does not support `store=True`"},
		{"prompt too long", `{"input":"` + strings.Repeat("w ", 40) + `"}`, 400, "invalid_request_error", "input", "exceeds the max_model_len 32. Please reduce prompt."},
		{"no output tokens", `{"input":"x","max_output_tokens":0}`, 400, "BadRequestError", "max_tokens", "max_tokens must be at least 1, got 0."},
		{"negative temperature", `{"input":"x","temperature":-1}`, 400, "BadRequestError", "temperature", "temperature must be non-negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := postJSON(t, newClient(t), s.URL()+"/v1/responses", []byte(c.body), nil)
			e := decodeError(t, body)
			if status != c.status || e.Error.Type != c.typ || e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.msg) || e.Error.Code != c.status {
				t.Errorf("%d %s", status, body)
			}
		})
	}
	if status, body := postJSON(t, newClient(t), s.URL()+"/v1/responses/resp_x/cancel", nil, nil); status != http.StatusNotFound {
		t.Errorf("cancel of an unknown response: %d %s", status, body)
	}
}

// responsesFaultPoints: what a Responses client has seen when a fault
// fires: created and in_progress come with the headers; then the item,
// its part and a delta per token.
var responsesFaultPoints = []struct {
	spec           string
	headers        bool
	events         int
	computed, sent int
}{
	{"accept", false, 0, 0, 0},
	{"prefill", true, 2, 0, 0},
	{"computed:2", true, 6, 3, 2},
	{"sent:2", true, 7, 3, 3},
}

func responsesFaultRequest(t *testing.T, s *Server, spec string, stream bool) *http.Request {
	body := jsonBody(t, map[string]any{"model": "sim-model", "input": "fault matrix", "max_output_tokens": 6, "stream": stream})
	return newPost(t, testContext(t), s.URL()+"/v1/responses", body, map[string]string{"X-Sim-Fault": spec})
}

// TestResponsesFaultErrorCutsTheStream: vLLM has no error event for a
// Responses stream; its stream generator raises and the connection closes
// inside the chunked body.
func TestResponsesFaultErrorCutsTheStream(t *testing.T) {
	for _, p := range responsesFaultPoints {
		for _, action := range []string{"error", "error:nodone", "status:503"} {
			t.Run(action+"@"+p.spec, func(t *testing.T) {
				s := startSim(t, Config{})
				o := observeNamed(testContext(t), newClient(t), responsesFaultRequest(t, s, action+"@"+p.spec, true), nil)
				if !p.headers {
					e := decodeError(t, o.body)
					wantStatus, wantType := 500, "InternalServerError"
					if action == "status:503" {
						wantStatus, wantType = 503, "ServiceUnavailableError"
					}
					if o.status != wantStatus || e.Error.Type != wantType || o.err != nil {
						t.Errorf("status %d, body %s, err %v", o.status, o.body, o.err)
					}
				} else if !errors.Is(o.err, io.ErrUnexpectedEOF) || len(o.events) != p.events {
					t.Errorf("events %q, err %v, want %d events and the body cut short", o.names(), o.err, p.events)
				}
				if rec := s.Records()[0]; rec.Outcome != OutcomeError || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
					t.Errorf("record = %+v", rec)
				}
			})
		}
	}
	t.Run("whole", func(t *testing.T) {
		s := startSim(t, Config{})
		o := observeNamed(testContext(t), newClient(t), responsesFaultRequest(t, s, "error@computed:1", false), nil)
		if e := decodeError(t, o.body); o.status != 500 || e.Error.Message != "Internal server error" {
			t.Errorf("%d %s", o.status, o.body)
		}
	})
}

func TestResponsesFaultsBreakTheConnection(t *testing.T) {
	for _, p := range responsesFaultPoints {
		t.Run("crash@"+p.spec, func(t *testing.T) {
			s := startSim(t, Config{EnableResponsesStore: true})
			o := observeNamed(testContext(t), newClient(t), responsesFaultRequest(t, s, "crash@"+p.spec, true), nil)
			if !isReset(o.err) || len(o.events) != p.events {
				t.Errorf("events %q, err %v", o.names(), o.err)
			}
			if rec := s.Records()[0]; rec.Outcome != OutcomeCrashed || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
		})
	}
	for _, c := range []struct {
		spec    string
		events  int
		outcome string
	}{
		{"garbage@sent:1", 7, OutcomeGarbage},
		{"oversize@sent:0", 6, OutcomeOversize},
	} {
		t.Run(c.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			ctx, cancel := contextWithCancel(t)
			progress := make(chan int, 100)
			done := make(chan namedObservation, 1)
			req := responsesFaultRequest(t, s, c.spec, true)
			go func() { done <- observeNamed(ctx, newClient(t), req, progress) }()
			waitProgress(t, progress, c.events)
			cancel()
			o := <-done
			last := o.events[len(o.events)-1]
			if last.name != "response.output_text.delta" || json.Valid([]byte(last.data)) != (c.outcome == OutcomeOversize) {
				t.Errorf("last event %s (%d bytes)", last.name, len(last.data))
			}
			if rec := waitRecord(t, s, ended); rec.Outcome != c.outcome {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}
