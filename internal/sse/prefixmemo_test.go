package sse

import (
	"bytes"
	"testing"
)

// A stream's chunks summarized through the decoder's prefix memo must come out exactly as
// each one summarized alone: the memo may only save work, never change an answer.
func FuzzPrefixMemo(f *testing.F) {
	for _, tc := range streamCases {
		var prev []byte
		for _, w := range tc.want {
			if w.data == nil {
				continue
			}
			if prev != nil {
				f.Add(prev, []byte(*w.data))
			}
			prev = []byte(*w.data)
		}
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
		f.Add([]byte(head+`,"choices":[{"index":0,"delta":{"content":"a"}}]}`), []byte(next))
		f.Add([]byte(head+`}`), []byte(next))
		f.Add([]byte(`  `+head+`,"choices":[]}`), []byte(next))
	}
	f.Add([]byte(`{"object":"error","id":"x","choices":[]}`), []byte(`{"object":"error","id":"x","choices":[]}`))
	f.Add([]byte(`{"id":"x","object":"error"}`), []byte(`{"id":"x","object":"error"}`))
	f.Add([]byte(`{ "id" : "x" , "choices":[]}`), []byte(`{ "id" : "x" , "usage":{}}`))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var m streamMemo
		if got, want := m.summarize(first), Summarize(first); got != want {
			t.Fatalf("first %q: memo %+v, alone %+v", first, got, want)
		}
		if got, want := m.summarize(second), Summarize(second); got != want {
			t.Fatalf("second %q after %q (prefix %q): memo %+v, alone %+v", second, first, m.prefix, got, want)
		}
		if len(m.prefix) > maxMemoPrefix {
			t.Fatalf("memo kept %d bytes, more than %d", len(m.prefix), maxMemoPrefix)
		}
	})
}

// The memo remembers the members every chunk of a vLLM stream repeats, and resumes after
// them: the prefix ends where "choices" begins.
func TestPrefixMemoRemembersTheRepeatedMembers(t *testing.T) {
	var m streamMemo
	m.summarize([]byte(vllmContent))
	want := vllmContent[:bytes.Index([]byte(vllmContent), []byte(`,"choices"`))]
	if string(m.prefix) != want {
		t.Fatalf("prefix %q, want %q", m.prefix, want)
	}
	// A chunk of another stream (another id) is scanned whole, and replaces the memo.
	other := bytes.Replace([]byte(vllmContent), []byte("chatcmpl-7f3a"), []byte("chatcmpl-8e2b"), 1)
	if got, want := m.summarize(other), Summarize(other); got != want {
		t.Fatalf("other stream: %+v, want %+v", got, want)
	}
	if !bytes.Contains(m.prefix, []byte("chatcmpl-8e2b")) {
		t.Fatalf("prefix %q not replaced by the other stream's", m.prefix)
	}
	// An error chunk's leading "object":"error" is never part of a prefix.
	m.summarize([]byte(`{"object":"error","message":"x"}`))
	if len(m.prefix) != 0 {
		t.Fatalf("prefix %q kept from an error chunk", m.prefix)
	}
}
