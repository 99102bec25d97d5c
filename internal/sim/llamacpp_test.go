package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The simulator speaks vLLM's wire format. These tests hold it against llama.cpp's server,
// whose answers are recorded in testdata/llamacpp (see the README there), on the points
// the gateway depends on: which events carry output and which are held before the
// delivery boundary, where a choice's finish reason and the token usage are, how a
// stream ends, the event names of the Messages and Responses streams, the status and
// shape of an error. Each recorded request is sent to the simulator as well, and the two
// answers are reduced to those points ("views"). Where the engines differ, the difference
// is spelled out below as a change to the simulator's view, so that a change on either
// side fails the test. The simulator is not changed to match: it stands in for vLLM.

// llamaRecord is one line of testdata/llamacpp/requests.txt.
type llamaRecord struct {
	file, path, body string
	status           int
}

func loadLlamaRecords(t *testing.T) map[string]llamaRecord {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "llamacpp", "requests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]llamaRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 5 {
			t.Fatalf("requests.txt line %q", sc.Text())
		}
		status, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatal(err)
		}
		out[fields[0]] = llamaRecord{file: fields[0], status: status,
			path: strings.TrimPrefix(fields[3], "POST "), body: fields[4]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sseEvent is one event of a stream: its name (empty without an "event:" line) and data.
type sseEvent struct{ name, data string }

// parseSSE splits a stream into events, skipping comment lines.
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	started := false
	for _, line := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
		switch {
		case line == "":
			if started {
				out = append(out, cur)
			}
			cur, started = sseEvent{}, false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			cur.name, started = line[len("event: "):], true
		case strings.HasPrefix(line, "data: "):
			cur.data, started = line[len("data: "):], true
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if started {
		out = append(out, cur)
	}
	return out
}

// chunkView reduces one event of a chat or completions stream to what the gateway reads
// from it: per choice "<index>:role" (held: a role, or nothing), "<index>:text" (output)
// or "<index>:finish=<reason>" (output), "+usage" when the chunk carries usage, "usage"
// for a usage-only chunk, "done" for [DONE], "null" for a JSON null, "error" for an error
// event.
func chunkView(t *testing.T, data string) string {
	t.Helper()
	switch data {
	case "[DONE]":
		return "done"
	case "null":
		return "null"
	}
	var c struct {
		Choices []struct {
			Index        int             `json:"index"`
			Text         *string         `json:"text"`
			Delta        json.RawMessage `json:"delta"`
			FinishReason *string         `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("event %q: %v", data, err)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return "error"
	}
	var parts []string
	for _, ch := range c.Choices {
		kind := "role"
		var d struct {
			Content *string `json:"content"`
		}
		json.Unmarshal(ch.Delta, &d)
		switch {
		case ch.FinishReason != nil:
			kind = "finish=" + *ch.FinishReason
		case d.Content != nil && *d.Content != "", ch.Text != nil && *ch.Text != "":
			kind = "text"
		}
		parts = append(parts, fmt.Sprintf("%d:%s", ch.Index, kind))
	}
	usage := len(c.Usage) > 0 && string(c.Usage) != "null"
	switch {
	case len(parts) == 0 && usage:
		return "usage"
	case usage:
		return strings.Join(parts, ",") + "+usage"
	}
	return strings.Join(parts, ",")
}

func streamView(t *testing.T, body []byte) []string {
	var out []string
	for _, ev := range parseSSE(t, body) {
		out = append(out, chunkView(t, ev.data))
	}
	return out
}

// perChoice splits a stream's view by choice index (the choices of n > 1 and of prompt
// arrays interleave in an order that depends on timing); events of no choice go under -1.
func perChoice(view []string) map[int][]string {
	out := map[int][]string{}
	for _, v := range view {
		idx, rest, ok := strings.Cut(v, ":")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil {
			out[-1] = append(out[-1], v)
			continue
		}
		out[n] = append(out[n], rest)
	}
	return out
}

// namedView reduces a Messages or Responses stream to its event names, each checked
// against the data's own type, with the stop reason of a Messages message_delta and the
// status of the response that ends a Responses stream.
func namedView(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range parseSSE(t, body) {
		var d struct {
			Type     string          `json:"type"`
			Delta    json.RawMessage `json:"delta"`
			Response struct {
				Status string `json:"status"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatalf("event %s %q: %v", ev.name, ev.data, err)
		}
		if d.Type != ev.name {
			t.Fatalf("event %s carries type %q", ev.name, d.Type)
		}
		v := ev.name
		switch {
		case ev.name == "message_delta":
			var delta struct {
				StopReason string `json:"stop_reason"`
			}
			json.Unmarshal(d.Delta, &delta)
			v += " stop_reason=" + delta.StopReason
		case strings.HasPrefix(ev.name, "response.") && d.Response.Status != "" && ev.name != "response.created" && ev.name != "response.in_progress":
			v += " status=" + d.Response.Status
		}
		out = append(out, v)
	}
	return out
}

// hasSequenceNumbers tells whether every event of a stream has a sequence_number.
func hasSequenceNumbers(t *testing.T, body []byte) bool {
	for _, ev := range parseSSE(t, body) {
		var d map[string]any
		json.Unmarshal([]byte(ev.data), &d)
		if _, ok := d["sequence_number"]; !ok {
			return false
		}
	}
	return true
}

// errorView reduces an error body to its status and shape: "openai" for {"error":{...}},
// "anthropic" for {"type":"error","error":{...}}, the JSON type of error.code and whether
// there is a message.
func errorView(t *testing.T, status int, body []byte) string {
	t.Helper()
	var e struct {
		Type  string         `json:"type"`
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		return fmt.Sprintf("%d not an error body: %s", status, body)
	}
	shape := "openai"
	if e.Type == "error" {
		shape = "anthropic"
	}
	code := "absent"
	switch e.Error["code"].(type) {
	case float64:
		code = "number"
	case string:
		code = "string"
	}
	msg, _ := e.Error["message"].(string)
	return fmt.Sprintf("%d %s code:%s message:%v", status, shape, code, msg != "")
}

func llamaErrorType(t *testing.T, body []byte) string {
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	return e.Error.Type
}

// usageTokens reads usage.completion_tokens (or output_tokens) of a whole answer.
func usageTokens(t *testing.T, body []byte) int {
	var u struct {
		Usage struct {
			CompletionTokens *int `json:"completion_tokens"`
			OutputTokens     *int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &u); err != nil {
		t.Fatal(err)
	}
	switch {
	case u.Usage.CompletionTokens != nil:
		return *u.Usage.CompletionTokens
	case u.Usage.OutputTokens != nil:
		return *u.Usage.OutputTokens
	}
	return -1
}

func readLlamaFixture(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "llamacpp", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLlamacppShapes(t *testing.T) {
	records := loadLlamaRecords(t)
	// A context of 64 tokens: the recorded overflow prompt (120 words) does not fit, the
	// others do.
	s := startSim(t, Config{MaxModelLen: 64})
	c := newClient(t)
	// ask sends a recorded request to the simulator, for its model.
	ask := func(file string) (llamaRecord, int, []byte) {
		t.Helper()
		r, ok := records[file]
		if !ok {
			t.Fatalf("%s is not in requests.txt", file)
		}
		body := strings.Replace(r.body, `"model":"tiny-llama"`, `"model":"sim-model"`, 1)
		status, b := postJSON(t, c, s.URL()+r.path, []byte(body), nil)
		return r, status, b
	}

	// Streams whose views are the same: role chunk held, one text chunk per token, a
	// finish chunk with an empty delta, a usage-only chunk when asked, [DONE].
	for _, file := range []string{"chat_stream.sse", "chat_stream_usage.sse"} {
		t.Run(file, func(t *testing.T) {
			_, status, sim := ask(file)
			llama, want := streamView(t, readLlamaFixture(t, file)), streamView(t, sim)
			if status != 200 || !slices.Equal(llama, want) {
				t.Fatalf("llama.cpp %v\nsim (%d)  %v", llama, status, want)
			}
		})
	}
	t.Run("chat_stream_n2.sse", func(t *testing.T) {
		_, _, sim := ask("chat_stream_n2.sse")
		llama, want := perChoice(streamView(t, readLlamaFixture(t, "chat_stream_n2.sse"))), perChoice(streamView(t, sim))
		if fmt.Sprint(llama) != fmt.Sprint(want) {
			t.Fatalf("llama.cpp %v\nsim       %v", llama, want)
		}
	})
	// Difference: llama.cpp's completions stream puts usage on each choice's finish chunk,
	// asked for or not (vLLM only with stream_options.include_usage, in a chunk of its own).
	addUsage := func(view []string) []string {
		out := slices.Clone(view)
		for i, v := range out {
			if strings.Contains(v, "finish=") {
				out[i] = v + "+usage"
			}
		}
		return out
	}
	t.Run("completions_stream.sse", func(t *testing.T) {
		_, _, sim := ask("completions_stream.sse")
		llama, want := streamView(t, readLlamaFixture(t, "completions_stream.sse")), addUsage(streamView(t, sim))
		if !slices.Equal(llama, want) {
			t.Fatalf("llama.cpp %v\nsim+usage %v", llama, want)
		}
	})
	// Difference: llama.cpp sends a "data: null" event in a prompt array's stream (an
	// event that is no chunk at all, which the official Node SDK fails on).
	t.Run("completions_stream_2prompts.sse", func(t *testing.T) {
		_, _, sim := ask("completions_stream_2prompts.sse")
		llama := perChoice(streamView(t, readLlamaFixture(t, "completions_stream_2prompts.sse")))
		want := perChoice(addUsage(streamView(t, sim)))
		want[-1] = append([]string{"null"}, want[-1]...)
		if fmt.Sprint(llama) != fmt.Sprint(want) {
			t.Fatalf("llama.cpp      %v\nsim+usage+null %v", llama, want)
		}
	})
	t.Run("messages_stream.sse", func(t *testing.T) {
		_, _, sim := ask("messages_stream.sse")
		llama, want := namedView(t, readLlamaFixture(t, "messages_stream.sse")), namedView(t, sim)
		if !slices.Equal(llama, want) {
			t.Fatalf("llama.cpp %v\nsim       %v", llama, want)
		}
	})
	// Differences: llama.cpp's Responses events carry no sequence_number (nor output_index
	// or content_index), and an answer cut by max_output_tokens ends "completed" where
	// vLLM says "incomplete".
	t.Run("responses_stream.sse", func(t *testing.T) {
		_, _, sim := ask("responses_stream.sse")
		fixture := readLlamaFixture(t, "responses_stream.sse")
		llama, want := namedView(t, fixture), namedView(t, sim)
		for i, v := range want {
			want[i] = strings.Replace(v, "status=incomplete", "status=completed", 1)
		}
		if !slices.Equal(llama, want) {
			t.Fatalf("llama.cpp %v\nsim       %v", llama, want)
		}
		if hasSequenceNumbers(t, fixture) || !hasSequenceNumbers(t, sim) {
			t.Fatal("sequence numbers: llama.cpp has none, the simulator has them on every event")
		}
	})

	// Whole answers: the same status and usage, except where noted.
	for file, tokens := range map[string][2]int{
		"chat.json": {3, 3}, "completions.json": {3, 3}, "messages.json": {3, 3}, "responses.json": {3, 3},
		// Difference: llama.cpp's usage of n = 2 counts one choice's tokens; vLLM sums them.
		"chat_n2.json": {2, 4},
	} {
		t.Run(file, func(t *testing.T) {
			r, status, sim := ask(file)
			llama := readLlamaFixture(t, file)
			if r.status != 200 || status != 200 {
				t.Fatalf("status llama.cpp %d, sim %d", r.status, status)
			}
			if got := [2]int{usageTokens(t, llama), usageTokens(t, sim)}; got != tokens {
				t.Fatalf("usage tokens llama.cpp, sim: %v, want %v", got, tokens)
			}
		})
	}

	// Errors: OpenAI's shape with an integer code equal to the status, in both, except
	// where noted; the gateway normalises them all (internal/openai).
	for file, want := range map[string]struct {
		llama, sim         string
		llamaType, simType string
	}{
		// llama.cpp's own type names the cause; vLLM's is the exception's class.
		"context_error.json":           {"400 openai code:number message:true", "400 openai code:number message:true", "exceed_context_size_error", "BadRequestError"},
		"context_error_stream.json":    {"400 openai code:number message:true", "400 openai code:number message:true", "exceed_context_size_error", "BadRequestError"},
		"responses_context_error.json": {"400 openai code:number message:true", "400 openai code:number message:true", "exceed_context_size_error", "invalid_request_error"},
		// Difference: llama.cpp answers the Messages API's errors in OpenAI's shape; vLLM
		// in Anthropic's.
		"messages_context_error.json": {"400 openai code:number message:true", "400 anthropic code:absent message:true", "exceed_context_size_error", "BadRequestError"},
		"bad_param_error.json":        {"400 openai code:number message:true", "400 openai code:number message:true", "invalid_request_error", "BadRequestError"},
		// Difference: llama.cpp refuses more choices than it has slots (here 2); vLLM
		// serves them.
		"n_error.json": {"400 openai code:number message:true", "200", "invalid_request_error", ""},
		// Difference: llama.cpp stores no responses and refuses previous_response_id;
		// vLLM without its store answers that the id is not found.
		"responses_previous_id_error.json": {"400 openai code:number message:true", "404 openai code:number message:true", "invalid_request_error", "invalid_request_error"},
	} {
		t.Run(file, func(t *testing.T) {
			r, status, sim := ask(file)
			llama := readLlamaFixture(t, file)
			gotLlama := errorView(t, r.status, llama)
			gotSim := fmt.Sprint(status)
			if status != 200 {
				gotSim = errorView(t, status, sim)
			}
			if gotLlama != want.llama || gotSim != want.sim {
				t.Fatalf("llama.cpp %q, sim %q; want %q, %q", gotLlama, gotSim, want.llama, want.sim)
			}
			if lt, st := llamaErrorType(t, llama), llamaErrorType(t, sim); lt != want.llamaType || (status != 200 && st != want.simType) {
				t.Fatalf("error types llama.cpp %q, sim %q; want %q, %q", lt, st, want.llamaType, want.simType)
			}
		})
	}

	// Every recorded file is compared above.
	compared := []string{"chat_stream.sse", "chat_stream_usage.sse", "chat_stream_n2.sse", "completions_stream.sse",
		"completions_stream_2prompts.sse", "messages_stream.sse", "responses_stream.sse", "chat.json", "completions.json",
		"messages.json", "responses.json", "chat_n2.json", "context_error.json", "context_error_stream.json",
		"responses_context_error.json", "messages_context_error.json", "bad_param_error.json", "n_error.json",
		"responses_previous_id_error.json"}
	for file := range records {
		if !slices.Contains(compared, file) {
			t.Errorf("%s is recorded but not compared", file)
		}
	}
}
