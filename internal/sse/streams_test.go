package sse

// Chunks and streams shaped like what real engines send. They are written
// out by hand from the engines' serialisers, field order included, because
// the scanner must cope with each engine's habits (SGLang's explicit nulls,
// llama.cpp's key order and trailing timings, vLLM's usage-only chunk).

const (
	vllmRole       = `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
	vllmContent    = `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}`
	vllmFinish     = `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`
	vllmUsage      = `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":12,"total_tokens":19,"completion_tokens":7}}`
	vllmReasoning  = `{"id":"chatcmpl-9c1","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null}]}`
	vllmReasoning2 = `{"id":"chatcmpl-9c1","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":" step by step"},"logprobs":null,"finish_reason":null}]}`
	vllmToolStart  = `{"id":"chatcmpl-1d2","object":"chat.completion.chunk","created":1733000000,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-5b8e","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`
	vllmToolArgs   = `{"id":"chatcmpl-1d2","object":"chat.completion.chunk","created":1733000000,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`
	vllmToolDone   = `{"id":"chatcmpl-1d2","object":"chat.completion.chunk","created":1733000000,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}`
	vllmError      = `{"error":{"message":"The decoder prompt (length 9000) is longer than the maximum model length of 8192.","type":"BadRequestError","param":null,"code":400}}`
	vllmErrorOld   = `{"object":"error","message":"upstream engine died","type":"InternalServerError","param":null,"code":500}`
	vllmCompl      = `{"id":"cmpl-3e1","object":"text_completion","created":1733000000,"model":"m","choices":[{"index":0,"text":" world","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`
	vllmComplEnd   = `{"id":"cmpl-3e1","object":"text_completion","created":1733000000,"model":"m","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}`
	vllmNonStream  = `{"id":"chatcmpl-ab","object":"chat.completion","created":1733000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":"Paris.","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2},"prompt_logprobs":null}`
	vllmTwoChoice  = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"A"},"finish_reason":null},{"index":1,"delta":{"content":"B"},"finish_reason":null}]}`
	vllmTwoFinish  = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null},{"index":1,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`
	// vllmContentUsage is a content chunk with stream_options.continuous_usage_stats:
	// vLLM then puts the running usage in every chunk.
	vllmContentUsage = `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}}`

	sglangRole    = `{"id":"b1f0","object":"chat.completion.chunk","created":1733000000,"model":"default","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`
	sglangContent = `{"id":"b1f0","object":"chat.completion.chunk","created":1733000000,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":"Hi","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`
	sglangFinish  = `{"id":"b1f0","object":"chat.completion.chunk","created":1733000000,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":128009}],"usage":null}`
	sglangUsage   = `{"id":"b1f0","object":"chat.completion.chunk","created":1733000000,"model":"default","choices":[],"usage":{"prompt_tokens":8,"total_tokens":10,"completion_tokens":2,"prompt_tokens_details":null}}`
	sglangError   = `{"error":{"object":"error","message":"Request aborted","type":"BadRequestError","param":null,"code":400}}`

	llamaRole    = `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1733000000,"id":"chatcmpl-Xy","model":"gpt-3.5-turbo","system_fingerprint":"b4500-abc","object":"chat.completion.chunk"}`
	llamaContent = `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Bonjour"}}],"created":1733000000,"id":"chatcmpl-Xy","model":"gpt-3.5-turbo","system_fingerprint":"b4500-abc","object":"chat.completion.chunk"}`
	llamaFinish  = `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1733000000,"id":"chatcmpl-Xy","model":"gpt-3.5-turbo","system_fingerprint":"b4500-abc","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7},"timings":{"prompt_n":5,"prompt_ms":12.5,"predicted_n":2,"predicted_ms":30.1}}`
	llamaError   = `{"error":{"code":500,"message":"the request exceeds the available context size","type":"server_error"}}`

	tgiContent = `{"object":"chat.completion.chunk","id":"","created":1733000000,"model":"tgi","system_fingerprint":"3.0.1-sha-abc","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`
	tgiFinish  = `{"object":"chat.completion.chunk","id":"","created":1733000000,"model":"tgi","system_fingerprint":"3.0.1-sha-abc","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"eos_token"}],"usage":null}`
	tgiError   = `{"error":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"}`
)

// vllmChatStream is a whole vLLM chat stream with include_usage.
var vllmChatStream = "data: " + vllmRole + "\n\n" +
	"data: " + vllmContent + "\n\n" +
	"data: " + vllmContent + "\n\n" +
	"data: " + vllmFinish + "\n\n" +
	"data: " + vllmUsage + "\n\n" +
	"data: [DONE]\n\n"

// streamCase is a byte stream and the events it must decode to.
type streamCase struct {
	name   string
	stream string
	want   []wantEvent
	// rest is how many bytes stay buffered after the last event.
	rest int
}

type wantEvent struct {
	raw   string
	data  *string // nil: no data field
	name  string
	class Class
}

func str(s string) *string { return &s }

func ev(raw string, data string, class Class) wantEvent {
	return wantEvent{raw: raw, data: &data, class: class}
}

var streamCases = []streamCase{
	{
		name:   "vllm chat with usage",
		stream: vllmChatStream,
		want: []wantEvent{
			ev("data: "+vllmRole+"\n\n", vllmRole, 0),
			ev("data: "+vllmContent+"\n\n", vllmContent, Output),
			ev("data: "+vllmContent+"\n\n", vllmContent, Output),
			ev("data: "+vllmFinish+"\n\n", vllmFinish, Finish),
			ev("data: "+vllmUsage+"\n\n", vllmUsage, Usage),
			ev("data: [DONE]\n\n", "[DONE]", Done),
		},
	},
	{
		name: "vllm tool call with keepalive",
		stream: ": keepalive\n\n" +
			"data: " + vllmToolStart + "\n\n" +
			"data: " + vllmToolArgs + "\n\n" +
			"data: " + vllmToolDone + "\n\n" +
			"data: [DONE]\n\n",
		want: []wantEvent{
			{raw: ": keepalive\n\n", class: Comment},
			ev("data: "+vllmToolStart+"\n\n", vllmToolStart, Output|ToolCalls),
			ev("data: "+vllmToolArgs+"\n\n", vllmToolArgs, Output|ToolCalls),
			ev("data: "+vllmToolDone+"\n\n", vllmToolDone, Finish),
			ev("data: [DONE]\n\n", "[DONE]", Done),
		},
	},
	{
		name: "sglang with error mid-stream and no space after colon",
		stream: "data:" + sglangRole + "\n\n" +
			"data:" + sglangContent + "\n\n" +
			"data:" + sglangError + "\n\n",
		want: []wantEvent{
			ev("data:"+sglangRole+"\n\n", sglangRole, 0),
			ev("data:"+sglangContent+"\n\n", sglangContent, Output),
			ev("data:"+sglangError+"\n\n", sglangError, Error),
		},
	},
	{
		name: "llama.cpp CRLF with id and retry fields",
		stream: "retry: 3000\r\n\r\n" +
			"id: 1\r\ndata: " + llamaRole + "\r\n\r\n" +
			"id: 2\r\ndata: " + llamaContent + "\r\n\r\n" +
			"data: " + llamaFinish + "\r\n\r\n" +
			"data: [DONE]\r\n\r\n",
		want: []wantEvent{
			{raw: "retry: 3000\r\n\r\n"},
			ev("id: 1\r\ndata: "+llamaRole+"\r\n\r\n", llamaRole, 0),
			ev("id: 2\r\ndata: "+llamaContent+"\r\n\r\n", llamaContent, Output),
			ev("data: "+llamaFinish+"\r\n\r\n", llamaFinish, Finish|Usage),
			ev("data: [DONE]\r\n\r\n", "[DONE]", Done),
		},
	},
	{
		name: "llama.cpp error field",
		stream: "data: " + llamaContent + "\n\n" +
			"error: " + llamaError + "\n\n",
		want: []wantEvent{
			ev("data: "+llamaContent+"\n\n", llamaContent, Output),
			ev("error: "+llamaError+"\n\n", llamaError, Error),
		},
	},
	{
		name: "tgi with error and event name",
		stream: "data: " + tgiContent + "\n\n" +
			"event: error\ndata: " + tgiError + "\n\n",
		want: []wantEvent{
			ev("data: "+tgiContent+"\n\n", tgiContent, Output),
			{raw: "event: error\ndata: " + tgiError + "\n\n", data: str(tgiError), name: "error", class: Error},
		},
	},
	{
		name: "CR line endings",
		stream: "data: " + vllmContent + "\r\r" +
			": ping\r\r" +
			"data: [DONE]\r\r",
		want: []wantEvent{
			ev("data: "+vllmContent+"\r\r", vllmContent, Output),
			{raw: ": ping\r\r", class: Comment},
			ev("data: [DONE]\r\r", "[DONE]", Done),
		},
	},
	{
		name:   "mixed line endings",
		stream: "event: x\rdata: 1\r\ndata: 2\n\r\n" + "data: 3\n\r" + "data:\n\n",
		want: []wantEvent{
			{raw: "event: x\rdata: 1\r\ndata: 2\n\r\n", data: str("1\n2"), name: "x", class: Malformed},
			ev("data: 3\n\r", "3", 0),
			ev("data:\n\n", "", Malformed),
		},
	},
	{
		name:   "multi-line data",
		stream: "data: {\"choices\":[{\"text\":\ndata: \"a\"}]}\n\n" + "data: x\ndata:\ndata: y\n\n",
		want: []wantEvent{
			ev("data: {\"choices\":[{\"text\":\ndata: \"a\"}]}\n\n", "{\"choices\":[{\"text\":\n\"a\"}]}", Output),
			ev("data: x\ndata:\ndata: y\n\n", "x\n\ny", Malformed),
		},
	},
	{
		name:   "stray blank lines are skipped",
		stream: "\n\n\r\n" + "data: [DONE]\n\n" + "\n",
		want: []wantEvent{
			ev("data: [DONE]\n\n", "[DONE]", Done),
		},
	},
	{
		name:   "field with no colon and comment mixed with data",
		stream: "data\n\n" + ": note\ndata: [DONE]\n\n",
		want: []wantEvent{
			ev("data\n\n", "", Malformed),
			ev(": note\ndata: [DONE]\n\n", "[DONE]", Done),
		},
	},
	{
		name:   "final event cut mid-way stays buffered",
		stream: "data: " + vllmContent + "\n\n" + "data: " + vllmContent[:40],
		want: []wantEvent{
			ev("data: "+vllmContent+"\n\n", vllmContent, Output),
		},
		rest: len("data: ") + 40,
	},
	{
		name:   "event cut after its last line end stays buffered",
		stream: "data: [DONE]\n",
		rest:   len("data: [DONE]\n"),
	},
}
