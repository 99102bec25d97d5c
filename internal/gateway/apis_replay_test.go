package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/tidwall/gjson"
)

// postAPI sends body to url on the gateway and returns the whole answer.
func postAPI(t *testing.T, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sseData returns the data of every event of a stream, with its name.
func sseData(b []byte) (names, data []string) {
	var d sse.Decoder
	d.Append(b)
	for {
		ev, ok := d.Next()
		if !ok {
			return names, data
		}
		if ev.Data != nil {
			names = append(names, string(ev.Name))
			data = append(data, string(ev.Data))
		}
	}
}

var apiBodies = map[string]struct{ path, text, tool string }{
	"messages": {"/v1/messages",
		`{"model":"sim-model","max_tokens":6,"stream":true,"messages":[{"role":"user","content":"replay me"}]}`,
		`{"model":"sim-model","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"weather?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"tool","name":"get_weather"}}`},
	"responses": {"/v1/responses",
		`{"model":"sim-model","max_output_tokens":6,"stream":true,"input":"replay me"}`,
		`{"model":"sim-model","max_output_tokens":40,"stream":true,"input":"weather?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"function","name":"get_weather"}}`},
}

// A keyed request is replayed byte for byte, in its API's own stream format.
func TestAPIsKeyedReplay(t *testing.T) {
	for name, b := range apiBodies {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			first, body1 := postAPI(t, e.srv.URL+b.path, b.text, "Idempotency-Key", "replay-"+name)
			second, body2 := postAPI(t, e.srv.URL+b.path, b.text, "Idempotency-Key", "replay-"+name)
			if first.StatusCode != 200 || second.StatusCode != 200 || second.Header.Get("Idempotent-Replayed") != "true" ||
				!bytes.Equal(body1, body2) || first.Header.Get("X-Request-Id") != second.Header.Get("X-Request-Id") {
				t.Fatalf("first %d %q\nsecond %d %v %q", first.StatusCode, body1, second.StatusCode, second.Header, body2)
			}
			if e.totalSimRequests() != 1 {
				t.Fatalf("the replay reached a replica")
			}
		})
	}
}

// toolIDs returns the ids of the tool calls in a stream of the API: the tool_use block ids
// of a Messages stream; every call_id of a Responses stream (announced, done, and in the
// final response).
func toolIDs(name string, b []byte) []string {
	var ids []string
	_, data := sseData(b)
	for _, d := range data {
		switch name {
		case "messages":
			if gjson.Get(d, "content_block.type").String() == "tool_use" {
				ids = append(ids, gjson.Get(d, "content_block.id").String())
			}
		case "responses":
			if id := gjson.Get(d, "item.call_id"); id.Exists() {
				ids = append(ids, id.String())
			}
			gjson.Get(d, "response.output.#.call_id").ForEach(func(_, v gjson.Result) bool {
				ids = append(ids, v.String())
				return true
			})
		}
	}
	return ids
}

// Tool call ids are the logical request's: derived from its id, the same in every event
// that names the call and in a replay, different in another request.
func TestAPIsToolCallIDs(t *testing.T) {
	for name, b := range apiBodies {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			resp, body := postAPI(t, e.srv.URL+b.path, b.tool, "Idempotency-Key", "tools-"+name)
			id := resp.Header.Get("X-Request-Id")
			ids := toolIDs(name, body)
			var want string
			switch name {
			case "messages":
				want = gateway.ToolCallID(id, 0, 0, "chatcmpl-tool-"+strings.Repeat("0", 32))
			case "responses":
				want = gateway.ResponsesCallID(id, 0, "call_0")
			}
			if len(ids) == 0 || (name == "responses" && len(ids) < 3) {
				t.Fatalf("no tool call ids in %s", body)
			}
			for _, got := range ids {
				if got != want {
					t.Fatalf("ids %v, want all %q", ids, want)
				}
			}
			if name == "responses" && !regexp.MustCompile(`^call_[0-9A-Za-z]{24}$`).MatchString(want) {
				t.Fatalf("call id %q", want)
			}
			_, replayed := postAPI(t, e.srv.URL+b.path, b.tool, "Idempotency-Key", "tools-"+name)
			if again := toolIDs(name, replayed); again[0] != want {
				t.Fatalf("replay ids %v", again)
			}
			_, other := postAPI(t, e.srv.URL+b.path, b.tool)
			if o := toolIDs(name, other); len(o) == 0 || o[0] == want {
				t.Fatalf("another request's ids %v", o)
			}
		})
	}
}

// The interruption of each API is its own final event, and nothing follows it: no
// message_stop, no response.completed, no [DONE].
func TestAPIsInterruptionIsLast(t *testing.T) {
	for name, b := range apiBodies {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			e.armAll("crash@sent:1")
			_, body := postAPI(t, e.srv.URL+b.path, b.text)
			names, data := sseData(body)
			last := len(names) - 1
			switch name {
			case "messages":
				if last < 1 || names[last] != "error" || gjson.Get(data[last], "error.code").String() != "upstream_decode_interrupted" ||
					gjson.Get(data[last], "error.type").String() != "api_error" || !gjson.Get(data[last], "error.partial_output").Bool() {
					t.Fatalf("stream %q", body)
				}
			case "responses":
				if last < 2 || names[last-1] != "error" || names[last] != "response.failed" ||
					gjson.Get(data[last-1], "code").String() != "upstream_decode_interrupted" ||
					gjson.Get(data[last], "response.error.code").String() != "upstream_decode_interrupted" ||
					gjson.Get(data[last], "sequence_number").Int() != gjson.Get(data[last-1], "sequence_number").Int()+1 ||
					gjson.Get(data[last-1], "sequence_number").Int() != gjson.Get(data[last-2], "sequence_number").Int()+1 {
					t.Fatalf("stream %q", body)
				}
			}
			for _, n := range names {
				if n == "message_stop" || n == "response.completed" {
					t.Fatalf("an end event after a cut: %q", body)
				}
			}
			if bytes.Contains(body, []byte("[DONE]")) {
				t.Fatalf("[DONE] in %q", body)
			}
		})
	}
}
