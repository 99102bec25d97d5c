package sse

import (
	"encoding/json"
	"reflect"
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
