package request

import (
	"bytes"
	"io"
	"testing"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/tidwall/sjson"
)

// The body that asks for usage in every chunk is the client's with stream_options
// replaced by usageOptions when it names nothing else — so that a key given twice, or
// escaped, leaves no second, contrary value for the engine's parser to read last — and
// otherwise what setting both options on the whole body with sjson gave (the gateway's
// way before it kept the client's bytes), byte for byte but for whitespace after the
// object, which sjson dropped when it added the member and the client's bytes now keep;
// and it reads the same however often it is read.
func TestWithUsageMatchesWholeBodyRewrite(t *testing.T) {
	const msgs = `"model":"m","messages":[{"role":"user","content":"stream_options \"}"}],"stream":true`
	for _, body := range []string{
		`{` + msgs + `}`,
		`{` + msgs + ` }` + "\n",
		` { ` + msgs + ` , "stream_options" : null } `,
		`{` + msgs + `,"stream_options":{}}`,
		`{` + msgs + `,"stream_options":{ }}`,
		`{` + msgs + `,"stream_options":{"include_usage":false}}`,
		`{"stream_options":{"include_usage":false,"continuous_usage_stats":false},` + msgs + `}`,
		`{` + msgs + `,"stream_options":{"x":{"include_usage":1},"include_usage":true}}`,
		`{` + msgs + `,"stream_options":{"incl\u0075de_usage":false}}`,
		`{` + msgs + `,"stream_options":{"include_usage":false,"include_usage":false}}`,
		`{` + msgs + `,"tools":[{"stream_options":1}]}`,
	} {
		_, members, e := openai.Parse(openai.Chat, []byte(body), 0)
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		want, err := sjson.SetBytes([]byte(body), "stream_options.include_usage", true)
		if err == nil {
			want, err = sjson.SetBytes(want, "stream_options.continuous_usage_stats", true)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			// Of the bodies above, one's options name another member ("x"); null is no object.
			if m.Name == "stream_options" && m.Value[0] == '{' && !bytes.Contains(m.Value, []byte(`"x"`)) {
				want = []byte(body[:m.Offset] + `{"include_usage":true,"continuous_usage_stats":true}` + body[m.Offset+len(m.Value):])
			}
		}
		in := []byte(body)
		got, err := withUsage(in, members)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if string(in) != body {
			t.Fatalf("the client's body changed: %s", in)
		}
		const ws = " \t\r\n"
		want = append(bytes.TrimRight(want, ws), body[len(bytes.TrimRight([]byte(body), ws)):]...)
		for range 2 {
			read, _ := io.ReadAll(got.reader())
			if !bytes.Equal(read, want) || !bytes.Equal(got.bytes(), want) || got.size() != len(want) {
				t.Fatalf("%s:\ngot  %s\nwant %s", body, read, want)
			}
		}
	}
}

// The body of a token count names the model and carries the request's prompt or
// messages, or both, as the client wrote them.
func TestTokenizeBody(t *testing.T) {
	for _, tc := range []struct {
		ep         openai.Endpoint
		body, want string
	}{
		{openai.Chat, `{"model":"m","messages":[{"role":"user","content":"a <b>"}], "n":1}`, `{"model":"m","messages":[{"role":"user","content":"a <b>"}]}`},
		{openai.Completions, `{ "prompt" : ["a","b"] ,"model":"m\"x"}`, `{"model":"m\"x","prompt":["a","b"]}`},
		{openai.Completions, `{"model":"m","prompt":"p","messages":[1,2,3]}`, `{"model":"m","prompt":"p","messages":[1,2,3]}`},
		{openai.Completions, `{"model":"m","prompt":"a long prompt","messages":[]}`, `{"model":"m","prompt":"a long prompt","messages":[]}`},
		{openai.Responses, `{"model":"m","input":"x"}`, `{"model":"m"}`},
	} {
		req, members, e := openai.Parse(tc.ep, []byte(tc.body), 0)
		if e != nil {
			t.Fatalf("%s: %v", tc.body, e)
		}
		b := tokenizeBody(req.Model, members)
		got, _ := io.ReadAll(b.reader())
		if string(got) != tc.want || b.size() != len(got) {
			t.Errorf("%s: %s, want %s", tc.body, got, tc.want)
		}
	}
}
