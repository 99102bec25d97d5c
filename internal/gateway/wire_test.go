package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
)

func post(t *testing.T, url, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvents reads a whole SSE body and returns each event's data.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// On the wire: the role chunk reaches the client together with the first content, the
// stream ends with [DONE], and nothing is rewritten.
func TestWireCompleteStream(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp := post(t, e.srv.URL+"/v1/chat/completions",
		`{"model":"sim-model","stream":true,"max_tokens":5,"temperature":0,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	ev := sseEvents(t, resp.Body)
	if len(ev) < 4 || ev[len(ev)-1] != "[DONE]" || !strings.Contains(ev[0], `"role":"assistant"`) || !strings.Contains(ev[len(ev)-2], `"usage"`) {
		t.Fatalf("events %q", ev)
	}
	for _, d := range ev {
		if strings.Contains(d, `"error"`) {
			t.Fatalf("an ordinary chunk carries an error key: %s", d)
		}
	}
}

// On the wire: after the boundary, exactly one final error event with no event: line and no
// [DONE].
func TestWireInterruptionEvent(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.armAll("crash@sent:2")
	resp := post(t, e.srv.URL+"/v1/chat/completions",
		`{"model":"sim-model","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	raw, _ := io.ReadAll(resp.Body)
	body := string(raw)
	if strings.Contains(body, "[DONE]") || strings.Contains(body, "event:") {
		t.Fatalf("body %q", body)
	}
	ev := sseEvents(t, strings.NewReader(body))
	last := ev[len(ev)-1]
	var env struct {
		Error struct {
			Message, Type, Code, RequestID string
			Param                          *string
			PartialOutput                  bool `json:"partial_output"`
			Delivered                      int  `json:"delivered_output_tokens"`
			Retryable                      *bool
		}
	}
	if err := json.Unmarshal([]byte(last), &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Code != "upstream_decode_interrupted" || env.Error.Delivered != 3 || !env.Error.PartialOutput ||
		env.Error.Retryable == nil || *env.Error.Retryable || env.Error.Param != nil ||
		!strings.Contains(last, `"request_id":"`+resp.Header.Get("X-Request-Id")+`"`) {
		t.Fatalf("final event %s", last)
	}
	content := 0
	for _, d := range ev[:len(ev)-1] {
		if strings.Contains(d, `"content":" `) {
			content++
		}
	}
	if content != 3 {
		t.Fatalf("%d content chunks before the error, want 3: %q", content, ev)
	}
}

// Bad input gets the right status, an OpenAI-shaped error and an X-Request-Id.
func TestBadInput(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) { c.Limits.MaxBodyBytes = 4 << 20 }})
	big := `{"model":"sim-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 5<<20) + `"}]}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code, param              string
	}{
		{"malformed json", "POST", "/v1/chat/completions", `{"model":`, 400, "", ""},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "", "model"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "model"},
		{"wrong type", "POST", "/v1/chat/completions", `{"model":"sim-model","stream":"yes","messages":[{"role":"user","content":"x"}]}`, 400, "", "stream"},
		{"n above 128", "POST", "/v1/chat/completions", `{"model":"sim-model","n":129,"messages":[{"role":"user","content":"x"}]}`, 400, "", "n"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"sim-model"}`, 400, "", "messages"},
		{"no prompt", "POST", "/v1/completions", `{"model":"sim-model"}`, 400, "", "prompt"},
		{"too large", "POST", "/v1/chat/completions", big, 413, "request_too_large", ""},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "method_not_allowed", ""},
		{"unknown url", "POST", "/v1/nothing", `{}`, 404, "unknown_url", ""},
		{"unknown request", "GET", "/v1/requests/req_nope", ``, 404, "request_not_found", "id"},
		{"bad wait", "GET", "/v1/requests/req_nope?wait=soon", ``, 400, "invalid_value", "wait"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
				t.Fatalf("body %s is not an OpenAI error: %v", b, err)
			}
			if resp.StatusCode != c.status || env.Error.Message == "" || env.Error.Type == "" || env.Error.Code == nil ||
				!strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
				t.Fatalf("status %d body %s headers %v", resp.StatusCode, b, resp.Header)
			}
			if c.code != "" && *env.Error.Code != c.code {
				t.Fatalf("code %q, want %q", *env.Error.Code, c.code)
			}
			if c.param != "" && (env.Error.Param == nil || !strings.HasPrefix(*env.Error.Param, c.param)) {
				t.Fatalf("param %v, want %q (body %s)", env.Error.Param, c.param, b)
			}
		})
	}
	if e.totalSimRequests() != 0 {
		t.Fatalf("bad input reached a replica")
	}
}

// Every response carries X-Request-Id, the operational endpoints included.
func TestEveryResponseHasARequestID(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/models", "/nowhere"} {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
			t.Errorf("%s: no X-Request-Id", path)
		}
	}
}
