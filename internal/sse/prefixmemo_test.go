package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// A stream's chunks summarized through the decoder's memo (the leading members, the
// choices member) must come out exactly as each one summarized alone: the memo may only
// save work, never change an answer. Three chunks, so that what one chunk teaches the
// memo is tried on the next, including what a chunk that resumed after the remembered
// members taught it.
func FuzzPrefixMemo(f *testing.F) {
	for _, tc := range streamCases {
		var prev, prev2 []byte
		for _, w := range tc.want {
			if w.data == nil {
				continue
			}
			if prev != nil {
				f.Add(prev2, prev, []byte(*w.data))
			}
			prev, prev2 = []byte(*w.data), prev
		}
	}
	// Each engine's token chunk, its text changed: the choices member repeats but for the
	// output string, which the memo must still read (valid or not, empty or not).
	texts := []string{` Paris`, ``, `x`, `\"`, `\u00e9t\u00E9`, `\u12`, `\x`, "\t", "a\x01b", `é`, `"`, `\`,
		`a"},"logprobs":null,"finish_reason":"stop"}]}`}
	for _, chunk := range []string{vllmContent, vllmContentUsage, sglangContent, llamaContent, vllmCompl, vllmReasoning} {
		text := `" Paris"`
		for _, t := range []string{`"Hi"`, `"Bonjour"`, `" world"`, `"Let me think"`} {
			if strings.Contains(chunk, t) {
				text = t
			}
		}
		for i, a := range texts {
			b := texts[(i+1)%len(texts)]
			with := func(s string) []byte { return []byte(strings.Replace(chunk, text, `"`+s+`"`, 1)) }
			f.Add([]byte(chunk), with(a), with(b))
			f.Add(with(a), with(a), with(b))
		}
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `"index":0`, `"index":1`, 1)), []byte(chunk))
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `null`, `"stop"`, 1)), []byte(chunk))
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `{"choices"`, `{ "choices"`, 1)), []byte(chunk))
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `,"choices"`, `,"usage":null,"choices"`, 1)), []byte(chunk))
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `,"choices"`, `,"error":null,"choices"`, 1)), []byte(chunk))
		f.Add([]byte(chunk), []byte(strings.Replace(chunk, `"choices"`, `"x":1,"choices"`, 1)), []byte(chunk))
	}
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m"`
	for _, next := range []string{
		head + `}`,
		head + `,"choices":[]}`,
		head + `,"choices":[{"index":0,"delta":{"content":"x"}}]}`,
		head + `,"error":{"message":"boom"}}`,
		head + `,"error":null,"choices":[{"index":0,"delta":{"content":"x"}}]}`,
		head + `,"usage":{"completion_tokens":3}}`,
		head + `,"usage":null}`,
		head + `,"object":"error"}`,
		head + `,"choices":[{"index":0,"delta":{"content":"x"}}]} x`,
		head + `,"choices":[{"index":0,"delta":{"content":"x"}}]`,
		head + `"choices":[]}`,
		head + `,`,
		head,
		`[DONE]`,
		`null`,
		` {"id":"c1"}`,
	} {
		content := head + `,"choices":[{"index":0,"delta":{"content":"a"}}]}`
		f.Add([]byte(content), []byte(next), []byte(content))
		f.Add([]byte(head+`}`), []byte(next), []byte(next))
		f.Add([]byte(`  `+head+`,"choices":[]}`), []byte(next), []byte(content))
	}
	f.Add([]byte(`{"object":"error","id":"x","choices":[]}`), []byte(`{"object":"error","id":"x","choices":[]}`), []byte(`{}`))
	f.Add([]byte(`{"id":"x","object":"error"}`), []byte(`{"id":"x","object":"error"}`), []byte(`{}`))
	f.Add([]byte(`{ "id" : "x" , "choices":[]}`), []byte(`{ "id" : "x" , "usage":{}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, first, second, third []byte) {
		var m streamMemo
		for i, data := range [][]byte{first, second, third} {
			before := fmt.Sprintf("prefix %q, choices %q (split %d, first %v)", m.prefix, m.choices.member, m.choices.split, m.choices.first)
			if got, want := m.summary(data), Summarize(data); got != want {
				t.Fatalf("chunk %d %q, memo before it: %s\nmemo  %+v\nalone %+v", i, data, before, got, want)
			}
			if len(m.prefix) > maxMemoPrefix || len(m.choices.member) > maxMemoPrefix {
				t.Fatalf("memo kept %d and %d bytes, more than %d", len(m.prefix), len(m.choices.member), maxMemoPrefix)
			}
		}
	})
}

// The memo remembers the members every chunk of a vLLM stream repeats, and resumes after
// them: the prefix ends where "choices" begins.
func TestPrefixMemoRemembersTheRepeatedMembers(t *testing.T) {
	var m streamMemo
	m.summary([]byte(vllmContent))
	want := vllmContent[:bytes.Index([]byte(vllmContent), []byte(`,"choices"`))]
	if string(m.prefix) != want {
		t.Fatalf("prefix %q, want %q", m.prefix, want)
	}
	// A chunk of another stream (another id) is scanned whole, and replaces the memo.
	other := bytes.Replace([]byte(vllmContent), []byte("chatcmpl-7f3a"), []byte("chatcmpl-8e2b"), 1)
	if got, want := m.summary(other), Summarize(other); got != want {
		t.Fatalf("other stream: %+v, want %+v", got, want)
	}
	if !bytes.Contains(m.prefix, []byte("chatcmpl-8e2b")) {
		t.Fatalf("prefix %q not replaced by the other stream's", m.prefix)
	}
	// An error chunk's leading "object":"error" is never part of a prefix.
	m.summary([]byte(`{"object":"error","message":"x"}`))
	if len(m.prefix) != 0 {
		t.Fatalf("prefix %q kept from an error chunk", m.prefix)
	}
}

// summary is what the memo's summarize gives.
func (m *streamMemo) summary(data []byte) Summary {
	var sum Summary
	m.summarize(&sum, data)
	return sum
}
