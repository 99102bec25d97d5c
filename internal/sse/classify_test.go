package sse

import (
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		class Class
		count int
	}{
		{"vllm role-only chunk is not output", vllmRole, 0, 0},
		{"vllm content", vllmContent, Output, 1},
		{"vllm finish with empty content", vllmFinish, Finish, 0},
		{"vllm usage chunk with empty choices", vllmUsage, Usage, 0},
		{"vllm reasoning_content", vllmReasoning, Output, 1},
		{"vllm reasoning", vllmReasoning2, Output, 1},
		{"vllm tool call start", vllmToolStart, Output | ToolCalls, 1},
		{"vllm tool call arguments", vllmToolArgs, Output | ToolCalls, 1},
		{"vllm tool calls finish", vllmToolDone, Finish, 0},
		{"vllm error", vllmError, Error, 0},
		{"vllm legacy flat error", vllmErrorOld, Error, 0},
		{"vllm completions text", vllmCompl, Output, 1},
		{"vllm completions finish", vllmComplEnd, Finish, 0},
		{"vllm non-stream response", vllmNonStream, Output | Finish | Usage, 1},
		{"two choices with output", vllmTwoChoice, Output, 2},
		{"sglang role chunk with nulls", sglangRole, 0, 0},
		{"sglang content", sglangContent, Output, 1},
		{"sglang finish with null content", sglangFinish, Finish, 0},
		{"sglang usage", sglangUsage, Usage, 0},
		{"sglang error", sglangError, Error, 0},
		{"llama.cpp role with null content", llamaRole, 0, 0},
		{"llama.cpp content", llamaContent, Output, 1},
		{"llama.cpp finish with empty delta and usage", llamaFinish, Finish | Usage, 0},
		{"llama.cpp error", llamaError, Error, 0},
		{"tgi content", tgiContent, Output, 1},
		{"tgi finish", tgiFinish, Finish, 0},
		{"tgi string error", tgiError, Error, 0},

		{"done", "[DONE]", Done, 0},
		{"done with space is malformed", "[DONE] ", Malformed, 0},
		{"error null is not an error", `{"choices":[{"delta":{"content":"a"}}],"error":null}`, Output | NullError, 1},
		{"usage null is not usage", `{"choices":[],"usage":null}`, 0, 0},
		{"object other than error", `{"object":"chat.completion.chunk"}`, 0, 0},
		{"object error with escapes", `{"object":"\u0065rror"}`, Error, 0},
		{"escaped key", `{"ch\u006fices":[{"delta":{"c\u006Fntent":"x"}}]}`, Output, 1},
		{"escaped empty-looking content", `{"choices":[{"delta":{"content":"\n"}}]}`, Output, 1},
		{"empty tool_calls", `{"choices":[{"delta":{"tool_calls":[]}}]}`, 0, 0},
		{"empty tool_calls with space", `{"choices":[{"delta":{"tool_calls":[ ]}}]}`, 0, 0},
		{"null tool_calls", `{"choices":[{"delta":{"tool_calls":null}}]}`, 0, 0},
		{"message tool calls", `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"1"}]}}]}`, Output | ToolCalls, 1},
		{"content not a string", `{"choices":[{"delta":{"content":["x"]}}]}`, 0, 0},
		{"finish_reason null", `{"choices":[{"delta":{},"finish_reason":null}]}`, 0, 0},
		{"output and finish in one chunk", `{"choices":[{"delta":{"content":"."},"finish_reason":"stop"}]}`, Output | Finish, 1},
		{"nested choices are not top-level", `{"x":{"choices":[{"text":"a"}]}}`, 0, 0},
		{"nested error is not top-level", `{"choices":[{"delta":{"error":{"a":1}}}]}`, 0, 0},
		{"choices not an array", `{"choices":{"text":"a"}}`, 0, 0},
		{"choice not an object", `{"choices":["a",1,null]}`, 0, 0},
		{"delta not an object", `{"choices":[{"delta":"content"}]}`, 0, 0},
		{"whitespace everywhere", " \n{ \"choices\" : [ { \"delta\" : { \"content\" : \"a\" } } ] }\r\n", Output, 1},
		{"valid non-object", `[1,2,{"error":1}]`, 0, 0},
		{"valid scalar", `"error"`, 0, 0},

		{"empty", ``, Malformed, 0},
		{"truncated", vllmContent[:len(vllmContent)-1], Malformed, 0},
		{"trailing garbage", vllmContent + "x", Malformed, 0},
		{"two values", `{} {}`, Malformed, 0},
		{"trailing comma", `{"choices":[{"delta":{"content":"a"}},]}`, Malformed, 0},
		{"bad escape", `{"choices":[{"text":"\x"}]}`, Malformed, 0},
		{"short unicode escape", `{"a":"\u12"}`, Malformed, 0},
		{"control byte in string", "{\"a\":\"\x01\"}", Malformed, 0},
		{"single quotes", `{'a':1}`, Malformed, 0},
		{"bad number", `{"a":01}`, Malformed, 0},
		{"bad fraction", `{"a":1.}`, Malformed, 0},
		{"bad exponent", `{"a":1e}`, Malformed, 0},
		{"bad literal", `{"a":nul}`, Malformed, 0},
		{"missing colon", `{"a" 1}`, Malformed, 0},
		{"unclosed array in skipped value", `{"x":[1,2}`, Malformed, 0},
		{"mismatched brackets", `{"x":[{]}}`, Malformed, 0},
		{"output then malformed", `{"choices":[{"delta":{"content":"a"}}],}`, Malformed, 0},
		{"numbers", `{"a":[-0,0.5,-1.25e+10,3E-2,12]}`, 0, 0},
		{"deep but allowed", `{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, 0, 0},
		{"too deep", `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, Malformed, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify([]byte(tc.data)); got != tc.class {
				t.Errorf("Classify = %v, want %v", got, tc.class)
			}
			if got := Count([]byte(tc.data)); got != tc.count {
				t.Errorf("Count = %d, want %d", got, tc.count)
			}
		})
	}
}
