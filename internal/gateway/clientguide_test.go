package gateway_test

// The Go code of docs/clients.md. Each region between "guide:begin NAME" and "guide:end"
// is a snippet of that document (TestClientGuideSnippets keeps the two equal); the tests
// below run every snippet against a gateway and simulated replicas on loopback, and the
// llama.cpp recipe against llama-server.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/llamatest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// guide:begin go-gateway-error
// GatewayError is the error object of every fencegate error, in each API's shape: the
// code, and whether output was delivered, how much, and whether the same request may
// be sent again.
type GatewayError struct {
	Code                  string `json:"code"`
	Message               string `json:"message"`
	RequestID             string `json:"request_id"`
	PartialOutput         bool   `json:"partial_output"`
	DeliveredOutputTokens int    `json:"delivered_output_tokens"`
	Retryable             bool   `json:"retryable"`
}

// gatewayErrorOf finds the gateway's error in what openai-go returned: an *openai.Error
// for an error status (its RawJSON is the error object), an *ssestream.StreamError for
// the error event that ends an interrupted stream (its data is {"error":{...}}, in chat,
// completions and Responses alike). Any other error is the connection's.
func gatewayErrorOf(err error) (*GatewayError, error) {
	var apiErr *openai.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		var ge GatewayError
		if json.Unmarshal([]byte(apiErr.RawJSON()), &ge) == nil {
			return &ge, nil
		}
	case errors.As(err, &streamErr):
		var event struct {
			Error GatewayError `json:"error"`
		}
		if json.Unmarshal(streamErr.Event.Data, &event) == nil {
			return &event.Error, nil
		}
	}
	return nil, err
}

// guide:end

// guide:begin go-chat
// chatStream streams a chat answer. It returns the text received and, when the answer
// did not complete, the gateway's error.
func chatStream(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams,
	opts ...option.RequestOption) (string, *GatewayError, error) {
	stream := client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		for _, choice := range stream.Current().Choices {
			text.WriteString(choice.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		ge, err := gatewayErrorOf(err)
		return text.String(), ge, err
	}
	return text.String(), nil, nil
}

// guide:end

// guide:begin go-messages
// messagesStream streams a Messages answer. anthropic-sdk-go returns an *anthropic.Error
// both for an error status and for the error event of an interrupted stream; its RawJSON
// is the whole {"type":"error","error":{...}}.
func messagesStream(ctx context.Context, client anthropic.Client, params anthropic.MessageNewParams) (string, *GatewayError, error) {
	stream := client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		if delta, ok := stream.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			text.WriteString(delta.Delta.Text)
		}
	}
	err := stream.Err()
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var body struct {
			Error GatewayError `json:"error"`
		}
		if json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil {
			return text.String(), &body.Error, nil
		}
	}
	return text.String(), nil, err
}

// guide:end

// guide:begin go-responses
// responsesStream streams a Responses answer. openai-go stops at the error event, which
// carries the gateway's error as its "error" member, as chat's does.
func responsesStream(ctx context.Context, client openai.Client, params responses.ResponseNewParams) (string, *GatewayError, error) {
	stream := client.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		if event := stream.Current(); event.Type == "response.output_text.delta" {
			text.WriteString(event.Delta)
		}
	}
	if err := stream.Err(); err != nil {
		ge, err := gatewayErrorOf(err)
		return text.String(), ge, err
	}
	return text.String(), nil, nil
}

// guide:end

// guide:begin go-responses-failed
// failedResponse streams a Responses request and, when it was interrupted, returns its
// terminal response.failed, whose output holds the items delivered (a message with the
// text sent so far, function calls, reasoning; unfinished ones have status
// "incomplete"). openai-go's stream ends at the error event before it, so the events are
// read with the SDK's own decoder and types.
func failedResponse(ctx context.Context, client openai.Client, params responses.ResponseNewParams) (*responses.Response, error) {
	var raw *http.Response
	if err := client.Post(ctx, "responses", params, &raw, option.WithJSONSet("stream", true)); err != nil {
		return nil, err
	}
	events := ssestream.NewDecoder(raw)
	defer events.Close()
	for events.Next() {
		var event responses.ResponseStreamEventUnion
		if err := json.Unmarshal(events.Event().Data, &event); err != nil {
			return nil, err
		}
		if event.Type == "response.failed" {
			failed := event.AsResponseFailed().Response
			return &failed, nil
		}
	}
	return nil, events.Err()
}

// guide:end

// guide:begin go-continue-vllm
// continueChat continues an interrupted chat answer on vLLM or SGLang: the conversation,
// then the text received as a final assistant message that the engine leaves open
// (continue_final_message), without a new assistant header (add_generation_prompt false,
// which vLLM requires with it). The engine answers with the continuation only.
func continueChat(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, received string) (string, *GatewayError, error) {
	params.Messages = append(slices.Clone(params.Messages), openai.AssistantMessage(received))
	more, ge, err := chatStream(ctx, client, params,
		option.WithJSONSet("continue_final_message", true),
		option.WithJSONSet("add_generation_prompt", false))
	return received + more, ge, err
}

// guide:end

// guide:begin go-continue-llamacpp
// continueChatLlamaCpp continues an interrupted chat answer on llama.cpp's server, which
// takes a final assistant message as the start of its answer (unless started with
// --no-prefill-assistant).
func continueChatLlamaCpp(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, received string) (string, *GatewayError, error) {
	params.Messages = append(slices.Clone(params.Messages), openai.AssistantMessage(received))
	more, ge, err := chatStream(ctx, client, params)
	return received + more, ge, err
}

// guide:end

// guide:begin go-continue-messages
// continueMessages continues an interrupted Messages answer where the engine takes a
// final assistant message as the start of its answer: Anthropic's API and llama.cpp.
// vLLM's and SGLang's Messages endpoints answer it as a new turn instead.
func continueMessages(ctx context.Context, client anthropic.Client, params anthropic.MessageNewParams, received string) (string, *GatewayError, error) {
	params.Messages = append(slices.Clone(params.Messages), anthropic.NewAssistantMessage(anthropic.NewTextBlock(received)))
	more, ge, err := messagesStream(ctx, client, params)
	return received + more, ge, err
}

// guide:end

// guide:begin go-continue-responses
// continueResponse asks for the rest of an interrupted Responses answer. The failed
// response is not stored for previous_response_id to name, so the new request carries
// the conversation (params' input items) and the text received as an assistant message.
// llama.cpp continues that message, as it does in chat; vLLM, SGLang and OpenAI's API
// take it as a closed turn, so for them a user turn after it asks for the rest.
func continueResponse(ctx context.Context, client openai.Client, params responses.ResponseNewParams,
	received string, engineContinues bool) (string, *GatewayError, error) {
	input := append(slices.Clone(params.Input.OfInputItemList), inputMessage(responses.EasyInputMessageRoleAssistant, received))
	if !engineContinues {
		input = append(input, inputMessage(responses.EasyInputMessageRoleUser, "Continue exactly where you stopped."))
	}
	params.Input.OfInputItemList = input
	more, ge, err := responsesStream(ctx, client, params)
	if engineContinues {
		return received + more, ge, err
	}
	return more, ge, err
}

// inputMessage is a message input item with its type, which llama.cpp requires.
func inputMessage(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfMessage(text, role)
	item.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return item
}

// guide:end

// guide:begin go-tool-calls
// toolCallsToRun streams a chat answer that may call tools and returns the calls to run:
// all of them when the answer completed, none when it did not. A call cut short has
// partial arguments, and even a whole one belongs to an answer the client asks for again,
// which makes its calls anew. The Idempotency-Key makes a retry of this same request get
// the same answer, with the same call ids (the gateway's, derived from the request), so
// the id keys the tool's own deduplication.
func toolCallsToRun(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams,
	idempotencyKey string) ([]openai.ChatCompletionMessageToolCallUnion, *GatewayError, error) {
	stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithHeader("Idempotency-Key", idempotencyKey))
	defer stream.Close()
	var answer openai.ChatCompletionAccumulator
	for stream.Next() {
		answer.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		ge, err := gatewayErrorOf(err)
		return nil, ge, err
	}
	return answer.Choices[0].Message.ToolCalls, nil, nil
}

// guide:end

// guideEnv is a gateway in front of one simulated replica, so that a continuation goes to
// the replica that wrote the answer it continues.
func guideEnv(t *testing.T) *env { return newEnv(t, envOptions{replicas: 1}) }

func guideChat(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "sim-model", Temperature: openai.Float(0), MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
}

func wantInterruption(t *testing.T, ge *GatewayError, err error, delivered int) {
	t.Helper()
	if err != nil || ge == nil {
		t.Fatalf("error %v, gateway error %+v", err, ge)
	}
	if ge.Code != "upstream_decode_interrupted" || !ge.PartialOutput || ge.Retryable || ge.DeliveredOutputTokens != delivered ||
		!strings.HasPrefix(ge.RequestID, "req_") {
		t.Fatalf("gateway error %+v, want an interruption after %d tokens", ge, delivered)
	}
}

// The chat snippet finds the interruption of a stream (the replica reset after token 3
// was sent) and an error status before any output, with their fields.
func TestGuideChat(t *testing.T) {
	e := guideEnv(t)
	e.armAll("reset@sent:3")
	text, ge, err := chatStream(testCtx(t), e.client, guideChat("tell me"))
	wantInterruption(t, ge, err, 4)
	if want := e.direct(0, guideChat("tell me")); !strings.HasPrefix(want, text) || len(strings.Fields(text)) != 4 {
		t.Fatalf("received %q, want the first 4 tokens of %q", text, want)
	}
	params := guideChat("tell me")
	params.Model = "no-such-model"
	_, ge, err = chatStream(testCtx(t), e.client, params)
	if err != nil || ge == nil || ge.Code != "model_not_found" || ge.PartialOutput || ge.Retryable {
		t.Fatalf("error %v, gateway error %+v", err, ge)
	}
}

func guideMessages(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "sim-model", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
}

func anthropicClient(e *env) anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL(e.srv.URL), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
}

// The Messages snippet finds the interruption and an error status alike.
func TestGuideMessages(t *testing.T) {
	e := guideEnv(t)
	e.armAll("reset@sent:2")
	text, ge, err := messagesStream(testCtx(t), anthropicClient(e), guideMessages("tell me"))
	wantInterruption(t, ge, err, 3)
	if len(strings.Fields(text)) != 3 {
		t.Fatalf("received %q", text)
	}
	params := guideMessages("tell me")
	params.Model = "no-such-model"
	_, ge, err = messagesStream(testCtx(t), anthropicClient(e), params)
	if err != nil || ge == nil || ge.Code != "model_not_found" {
		t.Fatalf("error %v, gateway error %+v", err, ge)
	}
}

// The Responses snippets find the interruption, and response.failed's output is the
// message received.
func TestGuideResponses(t *testing.T) {
	e := guideEnv(t)
	params := responses.ResponseNewParams{Model: "sim-model", Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me")}}
	e.armAll("reset@sent:3")
	text, ge, err := responsesStream(testCtx(t), e.client, params)
	wantInterruption(t, ge, err, 4)
	e.armAll("reset@sent:3")
	failed, err := failedResponse(testCtx(t), e.client, params)
	if err != nil || failed == nil || failed.Error.Code != "upstream_decode_interrupted" || len(failed.Output) != 1 {
		t.Fatalf("response.failed %+v, %v", failed, err)
	}
	if got := failed.Output[0].AsMessage().Content[0].Text; got != text {
		t.Fatalf("response.failed holds %q, the stream delivered %q", got, text)
	}
}

// vLLM's continue_final_message, as the simulator honours it: on the replica that wrote
// the answer, with greedy decoding, the text received and its continuation are the
// whole answer.
func TestGuideContinueChat(t *testing.T) {
	e := guideEnv(t)
	whole := e.direct(0, guideChat("tell me a story"))
	e.armAll("reset@sent:3")
	received, ge, err := chatStream(testCtx(t), e.client, guideChat("tell me a story"))
	wantInterruption(t, ge, err, 4)
	answer, ge, err := continueChat(testCtx(t), e.client, guideChat("tell me a story"), received)
	if err != nil || ge != nil || answer != whole {
		t.Fatalf("continued answer %q (%v, %+v), want the whole answer %q", answer, err, ge, whole)
	}
}

// The Responses recipe is a new turn: the engine answers the conversation that ends with
// the text received and the user's request for the rest.
func TestGuideContinueResponses(t *testing.T) {
	e := guideEnv(t)
	params := responses.ResponseNewParams{Model: "sim-model", MaxOutputTokens: openai.Int(100), Input: responses.ResponseNewParamsInputUnion{
		OfInputItemList: responses.ResponseInputParam{inputMessage(responses.EasyInputMessageRoleUser, "tell me")}}}
	e.armAll("reset@sent:3")
	received, ge, err := responsesStream(testCtx(t), e.client, params)
	wantInterruption(t, ge, err, 4)
	more, ge, err := continueResponse(testCtx(t), e.client, params, received, false)
	prompt := sim.RenderChat([]sim.Message{{Role: "user", Content: "tell me"}, {Role: "assistant", Content: received},
		{Role: "user", Content: "Continue exactly where you stopped."}})
	want := strings.Join(sim.Tokens("sim-1", 0, prompt, sim.NaturalLength("sim-1", 0, prompt)), "")
	if err != nil || ge != nil || more != want {
		t.Fatalf("continuation %q (%v, %+v), want the new turn %q", more, err, ge, want)
	}
}

// On vLLM (and the simulator) a Messages assistant prefill is a new turn: the answer is
// the one to the conversation whose last, closed, message is the text received.
func TestGuideMessagesPrefillOnVLLMIsANewTurn(t *testing.T) {
	e := guideEnv(t)
	e.armAll("reset@sent:2")
	received, ge, err := messagesStream(testCtx(t), anthropicClient(e), guideMessages("tell me"))
	wantInterruption(t, ge, err, 3)
	answer, ge, err := continueMessages(testCtx(t), anthropicClient(e), guideMessages("tell me"), received)
	prompt := sim.RenderChat([]sim.Message{{Role: "user", Content: "tell me"}, {Role: "assistant", Content: received}})
	want := received + strings.Join(sim.Tokens("sim-1", 0, prompt, sim.NaturalLength("sim-1", 0, prompt)), "")
	if err != nil || ge != nil || answer != want {
		t.Fatalf("answer %q (%v, %+v), want a new turn %q", answer, err, ge, want)
	}
}

// Tool calls: a completed answer's calls are run, with ids a replay repeats; an
// interrupted answer's are not.
func TestGuideToolCalls(t *testing.T) {
	e := guideEnv(t)
	params := guideChat("weather in Oslo?")
	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	calls, ge, err := toolCallsToRun(testCtx(t), e.client, params, "k-weather")
	if err != nil || ge != nil || len(calls) != 1 || calls[0].Function.Name != "get_weather" || !json.Valid([]byte(calls[0].Function.Arguments)) {
		t.Fatalf("calls %+v (%v, %+v)", calls, err, ge)
	}
	again, _, err := toolCallsToRun(testCtx(t), e.client, params, "k-weather")
	if err != nil || len(again) != 1 || again[0].ID != calls[0].ID {
		t.Fatalf("the replay's calls %+v, want the id %s", again, calls[0].ID)
	}
	e.armAll("reset@sent:2")
	calls, ge, err = toolCallsToRun(testCtx(t), e.client, params, "k-weather-cut")
	if calls != nil || err != nil || ge == nil || ge.Code != "upstream_decode_interrupted" || !ge.PartialOutput {
		t.Fatalf("interrupted: calls %+v (%v, %+v)", calls, err, ge)
	}
}

// llama.cpp takes a final assistant message as the start of its answer, on chat,
// Messages and Responses. The tiny model's answer to a prompt follows from the prompt's last byte
// (llamatest.Model.Completion), so the continuation shows what the engine continued: the
// text received, not a new assistant turn (whose last byte is the template's ':').
func TestGuideContinueLlamaCpp(t *testing.T) {
	le := newLlamaEnv(t, 1, func(c *config.Config) {})
	received := le.model.ChatReply(3)
	const more = 5
	want := received + le.model.Completion(received, more)
	if want == received+le.model.ChatReply(more) {
		t.Fatal("the tiny model's continuation equals a new turn's answer: the test would prove nothing")
	}
	params := openai.ChatCompletionNewParams{Model: llamatest.ModelName, MaxTokens: openai.Int(more),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me")}}
	answer, ge, err := continueChatLlamaCpp(testCtx(t), le.client, params, received)
	if err != nil || ge != nil || answer != want {
		t.Fatalf("chat: %q (%v, %+v), want %q", answer, err, ge, want)
	}
	mparams := anthropic.MessageNewParams{Model: llamatest.ModelName, MaxTokens: more,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me"))}}
	answer, ge, err = continueMessages(testCtx(t), anthropicClient(le.env), mparams, received)
	if err != nil || ge != nil || answer != want {
		t.Fatalf("messages: %q (%v, %+v), want %q", answer, err, ge, want)
	}
	rparams := responses.ResponseNewParams{Model: llamatest.ModelName, MaxOutputTokens: openai.Int(more), Input: responses.ResponseNewParamsInputUnion{
		OfInputItemList: responses.ResponseInputParam{inputMessage(responses.EasyInputMessageRoleUser, "tell me")}}}
	answer, ge, err = continueResponse(testCtx(t), le.client, rparams, received, true)
	if err != nil || ge != nil || answer != want {
		t.Fatalf("responses: %q (%v, %+v), want %q", answer, err, ge, want)
	}
}
