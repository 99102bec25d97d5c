package openai

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// Every body a client sends goes through ParseRequest before anything else: for every
// endpoint, any input must be accepted or refused with a 400 naming an OpenAI code, never
// a panic, and an accepted request must carry what the gateway routes by.
func FuzzParseRequest(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5,"n":2,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":["a","b"],"max_tokens":1,"n":3}`,
		`{"model":"m","prompt":[[1,2],[3]],"temperature":2}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`,
		`{"model":"m","input":[{"role":"user","content":"x"}],"max_output_tokens":4,"previous_response_id":"resp_1","store":true}`,
		`{"model":"m","input":["a","b"],"encoding_format":"float"}`,
		`{"model":"m","model":"n","messages":[]}`,
		`{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
		"{\"model\":\"m\xff\"}",
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		`{"model":"m","max_tokens":-1}`, `{"model":"m","max_tokens":1e400}`, `{"model":"m","max_tokens":99999999999}`,
		`{"model":"m","n":0}`, `[]`, `null`, ``, `{`, `{"model":1}`, `{"a":"\"}"}`,
	}
	for _, s := range seeds {
		for ep := Chat; ep <= Embeddings; ep++ {
			f.Add(byte(ep), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, epByte byte, body []byte) {
		ep := Endpoint(epByte%uint8(Embeddings+1-Chat)) + Chat
		in := bytes.Clone(body)
		r, e := ParseRequest(ep, body)
		if !bytes.Equal(in, body) {
			t.Fatal("ParseRequest changed its input")
		}
		switch {
		case e != nil:
			if r != nil {
				t.Fatalf("%v: both a request and an error %v", ep, e)
			}
			if e.Status != http.StatusBadRequest || e.Code == "" || e.Message == "" {
				t.Fatalf("%v: error %+v is not a 400 with a code and a message", ep, e)
			}
		case r == nil:
			t.Fatalf("%v: neither a request nor an error", ep)
		default:
			if r.Model == "" || r.Endpoint != ep || !bytes.Equal(r.Body, body) {
				t.Fatalf("%v: accepted request %+v", ep, r)
			}
			if r.MaxTokens < 0 || r.N < 0 || r.Choices > MaxChoices || depth(body) > MaxDepth {
				t.Fatalf("%v: accepted out of bounds: max_tokens %d, n %d, choices %d", ep, r.MaxTokens, r.N, r.Choices)
			}
		}
	})
}
