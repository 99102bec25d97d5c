package sse

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestStripNullError(t *testing.T) {
	cases := map[string]string{
		`{"choices":[{"delta":{"content":"a"}}],"error":null}`: `{"choices":[{"delta":{"content":"a"}}]}`,
		`{"error":null,"id":"x","choices":[]}`:                 `{"id":"x","choices":[]}`,
		`{ "id" : "x" , "error" : null , "usage" : {"a":1} }`:  `{"id" : "x","usage" : {"a":1}}`,
		`{"error":null}`:                     `{}`,
		`{"id":"x","nested":{"error":null}}`: `{"id":"x","nested":{"error":null}}`,
		`{"err\u006fr":null,"id":"x"}`:       `{"id":"x"}`,
		`not json`:                           `not json`,
		`{"error":null,"broken":}`:           `{"error":null,"broken":}`,
		`{"error":null,"choices":[{"delta":{"content":"x"}}],"error":null}`: `{"choices":[{"delta":{"content":"x"}}]}`,
	}
	for in, want := range cases {
		got := string(StripNullError(nil, []byte(in)))
		if got != want {
			t.Errorf("StripNullError(%s) = %s, want %s", in, got, want)
			continue
		}
		var a, b any
		if json.Unmarshal([]byte(want), &a) == nil {
			if err := json.Unmarshal([]byte(got), &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("result %s is not the JSON expected", got)
			}
			if Classify([]byte(got))&NullError != 0 {
				t.Errorf("%s still has a null error", got)
			}
		}
	}
}

func FuzzStripNullError(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"a"}}],"error":null}`))
	f.Add([]byte(`{"error":null,"x":[1,{"error":null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := StripNullError(nil, data)
		if !json.Valid(data) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", data, out)
		}
		var in map[string]any
		if json.Unmarshal(data, &in) != nil {
			return
		}
		if v, ok := in["error"]; ok && v == nil {
			delete(in, "error")
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(in, got) {
			t.Fatalf("StripNullError(%q) = %q", data, out)
		}
	})
}

func TestStripUsage(t *testing.T) {
	cases := []struct{ in, want string }{
		{vllmContentUsage, strings.Replace(vllmContentUsage, `,"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`, "", 1)},
		{vllmCompl, strings.Replace(vllmCompl, `,"usage":null`, "", 1)},
		{llamaFinish, strings.Replace(llamaFinish, `,"usage":{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7}`, "", 1)},
		{`{"usage":null}`, `{}`},
		{` { "usage" : null } `, ` {  } `},
		{`{"usage":null,"id":"x"}`, `{"id":"x"}`},
		{`{"id":"x","usage":null}`, `{"id":"x"}`},
		{`{"id":"x","usage":{"completion_tokens":1},"choices":[]}`, `{"id":"x","choices":[]}`},
		{`{ "usage" : null ,` + "\n" + ` "id" : "x" }`, `{ "id" : "x" }`},
		{`{ "id" : "x" , "usage" : [ 1 ] }`, `{ "id" : "x" }`},
		{`{"id":"x","us\u0061ge":null}`, `{"id":"x"}`},
		{`{"usage":1,"usage":2,"id":"x","usage":3,"b":[],"usage":4}`, `{"id":"x","b":[]}`},
		{`{"usage":1,"usage":2}`, `{}`},
		{`{"id":"x","usage":1,"usage":2}`, `{"id":"x"}`},
		{`{"x":{"usage":null},"y":[{"usage":1}]}`, `{"x":{"usage":null},"y":[{"usage":1}]}`},
		{vllmContent, vllmContent},
		{`{}`, `{}`},
		{`[{"usage":null}]`, `[{"usage":null}]`},
		{`"usage"`, `"usage"`},
		{`[DONE]`, `[DONE]`},
		{`not json`, `not json`},
		{`{"usage":null,}`, `{"usage":null,}`},
		{`{"usage":null} x`, `{"usage":null} x`},
		{`{"id":"x","usage":{"completion_tokens":}}`, `{"id":"x","usage":{"completion_tokens":}}`},
		{``, ``},
	}
	for _, tc := range cases {
		in := []byte(tc.in)
		got := StripUsage([]byte("data: "), in)
		if string(got) != "data: "+tc.want {
			t.Errorf("StripUsage(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("StripUsage modified its input %s", tc.in)
		}
	}
}
