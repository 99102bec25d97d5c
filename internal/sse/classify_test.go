package sse

import (
	"encoding/json"
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

func TestSummarize(t *testing.T) {
	const (
		llamaUsage = `,"usage":{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7}`
		big        = "123456789012345678901234567890"
	)
	cases := []struct {
		name     string
		data     string
		class    Class
		outputs  int
		finished uint64
		high     int
		tokens   int
		cut      string // data[UsageStart:UsageEnd]
	}{
		{"vllm content", vllmContent, Output, 1, 0, 0, -1, ""},
		{"vllm finish", vllmFinish, Finish, 0, 1 << 0, 0, -1, ""},
		{"vllm usage chunk", vllmUsage, Usage, 0, 0, 0, 7,
			`,"usage":{"prompt_tokens":12,"total_tokens":19,"completion_tokens":7}`},
		{"vllm content with continuous usage", vllmContentUsage, Output | Usage, 1, 0, 0, 4,
			`,"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`},
		{"vllm completions with usage null", vllmCompl, Output, 1, 0, 0, -1, `,"usage":null`},
		{"vllm completions finish", vllmComplEnd, Finish, 0, 1 << 0, 0, -1, `,"usage":null`},
		{"vllm two choices finish", vllmTwoFinish, Finish, 0, 1<<0 | 1<<1, 0, -1, ""},
		{"vllm non-stream", vllmNonStream, Output | Finish | Usage, 1, 1 << 0, 0, 2,
			`,"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2}`},
		{"sglang finish with usage null", sglangFinish, Finish, 0, 1 << 0, 0, -1, `,"usage":null`},
		{"sglang usage", sglangUsage, Usage, 0, 0, 0, 2,
			`,"usage":{"prompt_tokens":8,"total_tokens":10,"completion_tokens":2,"prompt_tokens_details":null}`},
		{"llama.cpp usage in the middle", llamaFinish, Finish | Usage, 0, 1 << 0, 0, 2, llamaUsage},
		{"done", "[DONE]", Done, 0, 0, 0, -1, ""},
		{"valid non-object", `[{"usage":{"completion_tokens":4}}]`, 0, 0, 0, 0, -1, ""},

		{"finish in choices 1 and 3",
			`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null},{"index":1,"delta":{},"finish_reason":"stop"},{"index":2,"delta":{"content":"b"},"finish_reason":null},{"index":3,"delta":{},"finish_reason":"length"}]}`,
			Output | Finish, 2, 1<<1 | 1<<3, 0, -1, ""},
		{"index absent: position", `{"choices":[{"text":"a","finish_reason":null},{"text":"","finish_reason":"stop"}]}`,
			Output | Finish, 1, 1 << 1, 0, -1, ""},
		{"index after finish_reason", `{"choices":[{"finish_reason":"stop","index":5,"delta":{}}]}`,
			Finish, 0, 1 << 5, 0, -1, ""},
		{"index beats position", `{"choices":[{"index":2,"finish_reason":"stop"},{"index":0,"finish_reason":"stop"}]}`,
			Finish, 0, 1<<2 | 1<<0, 0, -1, ""},
		{"index 63", `{"choices":[{"index":63,"finish_reason":"stop"}]}`, Finish, 0, 1 << 63, 0, -1, ""},
		{"index 64", `{"choices":[{"index":64,"finish_reason":"stop"}]}`, Finish, 0, 0, 1, -1, ""},
		{"index 70", `{"choices":[{"index":70,"finish_reason":"stop"}]}`, Finish, 0, 0, 1, -1, ""},
		{"high and low indices", `{"choices":[{"index":70,"finish_reason":"stop"},{"index":0,"finish_reason":"stop"},{"index":64,"finish_reason":"length"},{"index":71,"finish_reason":null}]}`,
			Finish, 0, 1 << 0, 2, -1, ""},
		{"huge index", `{"choices":[{"index":` + big + `,"finish_reason":"stop"},{"index":1e30,"finish_reason":"stop"}]}`,
			Finish, 0, 0, 2, -1, ""},
		{"index not a non-negative integer: position",
			`{"choices":[{"index":"3","finish_reason":"stop"},{"index":-1,"finish_reason":"stop"},{"index":2.5,"finish_reason":"stop"},{"index":null,"finish_reason":"stop"},{"index":[9],"finish_reason":"stop"}]}`,
			Finish, 0, 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4, 0, -1, ""},
		{"integral index spellings", `{"choices":[{"index":3.0,"finish_reason":"stop"},{"index":50e-1,"finish_reason":"stop"},{"index":0.7e1,"finish_reason":"stop"},{"index":-0,"finish_reason":"stop"}]}`,
			Finish, 0, 1<<3 | 1<<5 | 1<<7 | 1<<0, 0, -1, ""},
		{"non-object choices keep their position", `{"choices":[null,"x",{"finish_reason":"stop"}]}`,
			Finish, 0, 1 << 2, 0, -1, ""},
		{"finish_reason null", `{"choices":[{"index":1,"finish_reason":null}]}`, 0, 0, 0, 0, -1, ""},
		{"escaped index and finish_reason", `{"choices":[{"\u0069ndex":4,"finish_re\u0061son":"stop"}]}`,
			Finish, 0, 1 << 4, 0, -1, ""},
		{"nested choices", `{"x":{"choices":[{"finish_reason":"stop"}]}}`, 0, 0, 0, 0, -1, ""},

		{"usage first", `{"usage":{"completion_tokens":3},"id":"x"}`, Usage, 0, 0, 0, 3, `"usage":{"completion_tokens":3},`},
		{"usage middle", `{"id":"x","usage":{"completion_tokens":3},"choices":[]}`, Usage, 0, 0, 0, 3, `,"usage":{"completion_tokens":3}`},
		{"usage last", `{"id":"x","usage":{"completion_tokens":3}}`, Usage, 0, 0, 0, 3, `,"usage":{"completion_tokens":3}`},
		{"usage alone", `{"usage":{"completion_tokens":3}}`, Usage, 0, 0, 0, 3, `"usage":{"completion_tokens":3}`},
		{"usage null alone", `{"usage":null}`, 0, 0, 0, 0, -1, `"usage":null`},
		{"usage null first", `{"usage":null,"id":"x"}`, 0, 0, 0, 0, -1, `"usage":null,`},
		{"usage not an object", `{"id":"x","usage":7}`, 0, 0, 0, 0, -1, `,"usage":7`},
		{"escaped usage key", `{"id":"x","us\u0061ge":{"completion\u005ftokens":3}}`, Usage, 0, 0, 0, 3,
			`,"us\u0061ge":{"completion\u005ftokens":3}`},
		{"whitespace everywhere, usage first",
			" \n{ \"usage\" : { \"prompt_tokens\" : 1 , \"completion_tokens\" : 4 } ,\r\n \"choices\" : [ { \"index\" : 1 , \"finish_reason\" : \"stop\" } ] }\t",
			Usage | Finish, 0, 1 << 1, 0, 4, "\"usage\" : { \"prompt_tokens\" : 1 , \"completion_tokens\" : 4 } ,\r\n "},
		{"whitespace everywhere, usage last", "{ \"id\" : 1 ,\n \"usage\" :\tnull\r\n}", 0, 0, 0, 0, -1, " ,\n \"usage\" :\tnull"},
		{"usage nested", `{"choices":[{"delta":{"usage":{"completion_tokens":4}}}],"x":{"usage":null},"y":[{"usage":{"completion_tokens":4}}]}`,
			0, 0, 0, 0, -1, ""},
		{"completion_tokens nested in usage", `{"usage":{"details":{"completion_tokens":4}}}`, Usage, 0, 0, 0, -1,
			`"usage":{"details":{"completion_tokens":4}}`},
		{"completion_tokens absent", `{"usage":{"prompt_tokens":4}}`, Usage, 0, 0, 0, -1, `"usage":{"prompt_tokens":4}`},
		{"completion_tokens 0", `{"usage":{"completion_tokens":0}}`, Usage, 0, 0, 0, 0, `"usage":{"completion_tokens":0}`},
		{"completion_tokens 4.0", `{"usage":{"completion_tokens":4.0}}`, Usage, 0, 0, 0, 4, `"usage":{"completion_tokens":4.0}`},
		{"completion_tokens 40e-1", `{"usage":{"completion_tokens":40e-1}}`, Usage, 0, 0, 0, 4, `"usage":{"completion_tokens":40e-1}`},
		{"completion_tokens 1.2E+3", `{"usage":{"completion_tokens":1.2E+3}}`, Usage, 0, 0, 0, 1200, `"usage":{"completion_tokens":1.2E+3}`},
		{"completion_tokens 4.5", `{"usage":{"completion_tokens":4.5}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":4.5}`},
		{"completion_tokens 4.0000000000000000001", `{"usage":{"completion_tokens":4.0000000000000000001}}`, Usage, 0, 0, 0, -1,
			`"usage":{"completion_tokens":4.0000000000000000001}`},
		{"completion_tokens negative", `{"usage":{"completion_tokens":-4}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":-4}`},
		{"completion_tokens -0", `{"usage":{"completion_tokens":-0}}`, Usage, 0, 0, 0, 0, `"usage":{"completion_tokens":-0}`},
		{"completion_tokens string", `{"usage":{"completion_tokens":"4"}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":"4"}`},
		{"completion_tokens null", `{"usage":{"completion_tokens":null}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":null}`},
		{"completion_tokens 2^53", `{"usage":{"completion_tokens":9007199254740992}}`, Usage, 0, 0, 0, 1 << 53,
			`"usage":{"completion_tokens":9007199254740992}`},
		{"completion_tokens above 2^53", `{"usage":{"completion_tokens":9007199254740993}}`, Usage, 0, 0, 0, -1,
			`"usage":{"completion_tokens":9007199254740993}`},
		{"completion_tokens huge", `{"usage":{"completion_tokens":1e300}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":1e300}`},
		{"completion_tokens tiny", `{"usage":{"completion_tokens":1e-300}}`, Usage, 0, 0, 0, -1, `"usage":{"completion_tokens":1e-300}`},

		{"malformed", `{"usage":{"completion_tokens":4},"choices":[{"index":1,"finish_reason":"stop"}],}`, Malformed, 0, 0, 0, -1, ""},
		{"truncated", vllmContentUsage[:len(vllmContentUsage)-1], Malformed, 0, 0, 0, -1, ""},
		{"trailing garbage", `{"usage":null} x`, Malformed, 0, 0, 0, -1, ""},
		{"empty", ``, Malformed, 0, 0, 0, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			s := Summarize(data)
			if s.Class != tc.class || s.Outputs != tc.outputs {
				t.Errorf("Class, Outputs = %v, %d; want %v, %d", s.Class, s.Outputs, tc.class, tc.outputs)
			}
			if s.Finished != tc.finished || s.FinishedHigh != tc.high {
				t.Errorf("Finished, FinishedHigh = %#x, %d; want %#x, %d", s.Finished, s.FinishedHigh, tc.finished, tc.high)
			}
			if s.CompletionTokens != tc.tokens {
				t.Errorf("CompletionTokens = %d, want %d", s.CompletionTokens, tc.tokens)
			}
			if got := tc.data[s.UsageStart:s.UsageEnd]; got != tc.cut || tc.cut == "" && s.UsageStart != 0 {
				t.Errorf("usage span %d:%d = %q, want %q", s.UsageStart, s.UsageEnd, got, tc.cut)
			}
			if c, n := ClassifyCount(data); c != s.Class || n != s.Outputs || Classify(data) != c || Count(data) != n {
				t.Errorf("Classify, Count and ClassifyCount disagree with Summarize")
			}
			if (s.Class&Finish != 0) != (s.Finished != 0 || s.FinishedHigh != 0) {
				t.Errorf("Finish is %v but Finished, FinishedHigh = %#x, %d", s.Class&Finish != 0, s.Finished, s.FinishedHigh)
			}
			cut := tc.data[:s.UsageStart] + tc.data[s.UsageEnd:]
			if got := string(StripUsage(nil, data)); got != cut {
				t.Errorf("StripUsage = %s, cutting the span gives %s", got, cut)
			}
			if json.Valid(data) && !json.Valid([]byte(cut)) {
				t.Errorf("cutting the span leaves invalid %s", cut)
			}
		})
	}
}

// TestSummarizeRepeatedUsage pins what happens with a repeated "usage" key,
// which no engine sends: as when decoding, the last one is the usage, so the
// span marks it and CompletionTokens is its own.
func TestSummarizeRepeatedUsage(t *testing.T) {
	data := `{"usage":{"completion_tokens":1},"id":"x","usage":{"completion_tokens":2},"usage":null}`
	s := Summarize([]byte(data))
	if s.Class != Usage || s.CompletionTokens != -1 || data[s.UsageStart:s.UsageEnd] != `,"usage":null` {
		t.Errorf("Summarize = %+v", s)
	}
	if s := Summarize([]byte(data[:len(data)-len(`,"usage":null}`)] + "}")); s.CompletionTokens != 2 {
		t.Errorf("CompletionTokens = %d, want 2 from the last usage", s.CompletionTokens)
	}
}

// Choice names the chunk's only choice, whose usage a continuous-usage chunk reports.
func TestSummarizeChoice(t *testing.T) {
	for _, tc := range []struct {
		data string
		want int
	}{
		{vllmContent, 0},
		{`{"choices":[{"index":3,"delta":{"content":"a"}}]}`, 3},
		{`{"choices":[{"delta":{"content":"a"},"\u0069ndex":70}]}`, 70},
		{`{"choices":[1,{"delta":{"content":"a"}}]}`, 1}, // position, as for Finished
		{`{"choices":[{"index":0},{"index":1}]}`, -1},
		{`{"choices":[],"usage":{"completion_tokens":9}}`, -1},
		{`{"id":"x"}`, -1},
		{"[DONE]", -1},
		{`{"choices":[{"index":0}`, -1}, // malformed
	} {
		if got := Summarize([]byte(tc.data)).Choice; got != tc.want {
			t.Errorf("Summarize(%s).Choice = %d, want %d", tc.data, got, tc.want)
		}
	}
	var d Decoder
	d.Append([]byte("data: {\"choices\":[{\"index\":2,\"delta\":{\"content\":\"x\"}}]}\n\n: keepalive\n\n"))
	if ev, ok := d.Next(); !ok || ev.Choice != 2 {
		t.Fatalf("decoder event %+v", ev)
	}
	if ev, ok := d.Next(); !ok || ev.Choice != -1 {
		t.Fatalf("comment event %+v", ev)
	}
}

// "data: null" (llama.cpp's server, between the prompts of a completions stream) is no
// chunk: it classifies as a comment, which the gateway never forwards.
func TestNullDataIsAComment(t *testing.T) {
	for _, data := range []string{"null", " null ", "null\n"} {
		if s := Summarize([]byte(data)); s.Class != Comment || s.Outputs != 0 || s.CompletionTokens != -1 {
			t.Errorf("%q: %+v", data, s)
		}
	}
	if c := Classify([]byte(`{"choices":null}`)); c&Comment != 0 {
		t.Errorf("an object with a null member is not a comment: %v", c)
	}
}
