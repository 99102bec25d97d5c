package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

func interrupted() *openai.Error {
	partial, retry, n := true, false, 37
	return &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_decode_interrupted",
		Message: "generation interrupted after part of the answer was sent", RequestID: "req_1",
		PartialOutput: &partial, DeliveredOutputTokens: &n, Retryable: &retry}
}

// events splits SSE bytes into (name, data) pairs.
func events(t *testing.T, b []byte) [][2]string {
	t.Helper()
	var d sse.Decoder
	d.Append(b)
	var out [][2]string
	for {
		ev, ok := d.Next()
		if !ok {
			break
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("event data is not JSON: %s", ev.Data)
		}
		out = append(out, [2]string{string(ev.Name), string(ev.Data)})
	}
	if d.Buffered() != 0 {
		t.Fatalf("trailing bytes in %q", b)
	}
	return out
}

func TestMessagesShapes(t *testing.T) {
	evs := events(t, Interruption(sse.Messages, interrupted(), Stream{}))
	if len(evs) != 1 || evs[0][0] != "error" {
		t.Fatalf("events %v", evs)
	}
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message, Code, RequestID string
			PartialOutput                  bool `json:"partial_output"`
			Delivered                      int  `json:"delivered_output_tokens"`
			Retryable                      *bool
		} `json:"error"`
	}
	json.Unmarshal([]byte(evs[0][1]), &v)
	if v.Type != "error" || v.Error.Type != "api_error" || v.Error.Code != "upstream_decode_interrupted" || !v.Error.PartialOutput ||
		v.Error.Delivered != 37 || v.Error.Retryable == nil || *v.Error.Retryable {
		t.Fatalf("interruption %s", evs[0][1])
	}
	for status, typ := range map[int]string{400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error",
		503: "overloaded_error", 502: "api_error", 504: "api_error", 413: "request_too_large", 401: "authentication_error"} {
		body := ErrorBody(sse.Messages, &openai.Error{Status: status, Type: "x", Code: "c", Message: "m"})
		json.Unmarshal(body, &v)
		if v.Type != "error" || v.Error.Type != typ || v.Error.Code != "c" {
			t.Errorf("status %d: %s", status, body)
		}
	}
	if string(Done(sse.Messages)) != "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" {
		t.Fatalf("done %q", Done(sse.Messages))
	}
}

func TestResponsesShapes(t *testing.T) {
	st := Stream{NextSequence: 12, ResponseID: "resp_9", Model: "m", CreatedAt: 1700000000}
	evs := events(t, Interruption(sse.Responses, interrupted(), st))
	if len(evs) != 2 || evs[0][0] != "error" || evs[1][0] != "response.failed" {
		t.Fatalf("events %v", evs)
	}
	var e struct {
		Type     string `json:"type"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Param    *string
		Sequence int64 `json:"sequence_number"`
		Partial  bool  `json:"partial_output"`
		Error    struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(evs[0][1]), &e)
	if e.Type != "error" || e.Code != "upstream_decode_interrupted" || e.Sequence != 12 || e.Param != nil || !e.Partial || e.Error.Code != e.Code {
		t.Fatalf("error event %s", evs[0][1])
	}
	var f struct {
		Type     string `json:"type"`
		Sequence int64  `json:"sequence_number"`
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"response"`
	}
	json.Unmarshal([]byte(evs[1][1]), &f)
	if f.Type != "response.failed" || f.Sequence != 13 || f.Response.ID != "resp_9" || f.Response.Status != "failed" || f.Response.Error.Code != e.Code {
		t.Fatalf("failed event %s", evs[1][1])
	}
	if s := sse.SummarizeEvent(sse.Responses, nil, []byte(evs[1][1])); s.Class != sse.Error {
		t.Fatalf("response.failed summarized %+v", s)
	}
	if body := string(ErrorBody(sse.Responses, interrupted())); !strings.HasPrefix(body, `{"error":{"message":`) {
		t.Fatalf("error body %s", body)
	}
	if Done(sse.Responses) != nil {
		t.Fatal("the Responses API has no end event after response.completed")
	}
}

func TestCompletionsShapes(t *testing.T) {
	evs := events(t, Interruption(sse.Completions, interrupted(), Stream{}))
	if len(evs) != 1 || evs[0][0] != "" || !strings.Contains(evs[0][1], `"code":"upstream_decode_interrupted"`) {
		t.Fatalf("events %v", evs)
	}
	if string(Done(sse.Completions)) != "data: [DONE]\n\n" {
		t.Fatal("done")
	}
}
