package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// responsesEvents streams a Responses request with the official Go client and decodes
// every event of the answer with the client's own types, the terminal one included: the
// SDK's stream ends at the error event, so a client that wants response.failed reads the
// events with the SDK's decoder itself.
func responsesEvents(t *testing.T, e *env, body string, opts ...option.RequestOption) []responses.ResponseStreamEventUnion {
	t.Helper()
	var raw *http.Response
	opts = append(opts, option.WithRequestBody("application/json", []byte(body)))
	if err := e.client.Post(testCtx(t), "responses", nil, &raw, opts...); err != nil {
		t.Fatal(err)
	}
	dec := ssestream.NewDecoder(raw)
	defer dec.Close()
	var out []responses.ResponseStreamEventUnion
	for dec.Next() {
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal(dec.Event().Data, &ev); err != nil {
			t.Fatalf("event %s: %v", dec.Event().Data, err)
		}
		out = append(out, ev)
	}
	if dec.Err() != nil {
		t.Fatal(dec.Err())
	}
	return out
}

// failedOutput returns the output of the stream's response.failed, which must be its
// last event, after an error event.
func failedOutput(t *testing.T, evs []responses.ResponseStreamEventUnion) []responses.ResponseOutputItemUnion {
	t.Helper()
	n := len(evs)
	if n < 2 || evs[n-2].Type != "error" || evs[n-1].Type != "response.failed" {
		t.Fatalf("the stream does not end in an error event and response.failed: %d events", n)
	}
	if code := evs[n-1].AsResponseFailed().Response.Error.Code; code != "upstream_decode_interrupted" {
		t.Fatalf("response.failed with code %q", code)
	}
	return evs[n-1].AsResponseFailed().Response.Output
}

// An interrupted Responses stream ends in response.failed whose output is the message
// the client received: the item response.output_item.added announced, with the text its
// deltas delivered, marked incomplete.
func TestResponsesFailedHoldsTheDeliveredMessage(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 1})
	evs := responsesEvents(t, e, `{"model":"sim-model","input":"tell me a story","max_output_tokens":20,"stream":true}`,
		option.WithHeader("X-Sim-Fault", "reset@sent:3"))
	var itemID, text string
	for _, ev := range evs {
		switch ev.Type {
		case "response.output_item.added":
			itemID = ev.AsResponseOutputItemAdded().Item.ID
		case "response.output_text.delta":
			text += ev.AsResponseOutputTextDelta().Delta
		}
	}
	out := failedOutput(t, evs)
	if itemID == "" || text == "" || len(out) != 1 {
		t.Fatalf("delivered item %q, text %q; response.failed output %d items", itemID, text, len(out))
	}
	msg := out[0].AsMessage()
	if out[0].Type != "message" || msg.ID != itemID || msg.Status != "incomplete" || msg.Role != "assistant" ||
		len(msg.Content) != 1 || msg.Content[0].Type != "output_text" || msg.Content[0].Text != text {
		t.Fatalf("response.failed output %s, want the message %s with the text %q", out[0].RawJSON(), itemID, text)
	}
}

// A function call cut in its arguments is in response.failed's output as the client
// received it: its call id (the request's own, as in output_item.added), its name and the
// arguments delivered so far, marked incomplete.
func TestResponsesFailedHoldsTheDeliveredFunctionCall(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 1})
	evs := responsesEvents(t, e, `{"model":"sim-model","input":"weather in Oslo?","stream":true,"tool_choice":"required",`+
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}`,
		option.WithHeader("X-Sim-Fault", "reset@sent:2"))
	var added responses.ResponseOutputItemUnion
	var args string
	for _, ev := range evs {
		switch ev.Type {
		case "response.output_item.added":
			added = ev.AsResponseOutputItemAdded().Item
		case "response.function_call_arguments.delta":
			args += ev.AsResponseFunctionCallArgumentsDelta().Delta
		}
	}
	out := failedOutput(t, evs)
	if added.Type != "function_call" || args == "" || len(out) != 1 {
		t.Fatalf("delivered %s with arguments %q; response.failed output %d items", added.RawJSON(), args, len(out))
	}
	call := out[0].AsFunctionCall()
	if out[0].Type != "function_call" || call.CallID != added.CallID || call.ID != added.ID || call.Name != "get_weather" ||
		call.Arguments != args || call.Status != "incomplete" {
		t.Fatalf("response.failed output %s, want the call %s with the arguments %q", out[0].RawJSON(), added.RawJSON(), args)
	}
}
