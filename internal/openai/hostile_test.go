package openai

import (
	"strings"
	"testing"
)

// Bodies a JSON decoder would take but the gateway refuses, on every endpoint, and their
// neighbours that pass.
func TestHostileBodies(t *testing.T) {
	nested := func(n int) string {
		return `{"model":"m","messages":[{"role":"user","content":"x"}],"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	for _, tc := range []struct {
		name, body string
		code       string // "" accepted
		param      string
	}{
		{"duplicate model", `{"model":"a","messages":[{"role":"user","content":"x"}],"model":"b"}`, "invalid_json", "model"},
		{"duplicate key spelled with an escape", `{"model":"a","messages":[{"role":"user","content":"x"}],"mod\u0065l":"b"}`, "invalid_json", "model"},
		{"duplicate keys nested", `{"model":"a","messages":[{"role":"user","content":"x","content":"y"}]}`, "", ""},
		{"invalid UTF-8", "{\"model\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "invalid_json", ""},
		{"nested to the limit", nested(MaxDepth), "", ""},
		{"nested past the limit", nested(MaxDepth + 1), "invalid_json", ""},
		{"brackets inside a string", `{"model":"a","messages":[{"role":"user","content":"` + strings.Repeat("[{", 500) + `\""}]}`, "", ""},
	} {
		_, e := ParseRequest(Chat, []byte(tc.body))
		switch {
		case tc.code == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.code != "" && (e == nil || e.Code != tc.code || e.Param != tc.param || e.Status != 400):
			t.Errorf("%s: %+v, want 400 %s param %q", tc.name, e, tc.code, tc.param)
		}
	}
}
