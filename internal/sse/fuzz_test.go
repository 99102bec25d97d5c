package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
)

// referenceClassify is Classify written the slow, obvious way: decode with
// encoding/json into maps and walk them. It defines what Classify must return.
func referenceClassify(data []byte) (Class, int) {
	if string(data) == "[DONE]" {
		return Done, 0
	}
	if !json.Valid(data) {
		return Malformed, 0
	}
	// UseNumber: a number too large for a float64 is still valid JSON.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(fmt.Sprintf("valid JSON %q does not decode: %v", data, err))
	}
	top, ok := v.(map[string]any)
	if !ok {
		return 0, 0
	}
	var class Class
	count := 0
	if u, ok := top["usage"].(map[string]any); ok && u != nil {
		class |= Usage
	}
	if e, ok := top["error"]; ok && e != nil {
		class |= Error
	}
	if top["object"] == "error" {
		class |= Error
	}
	if e, ok := top["error"]; ok && e == nil && class&Error == 0 {
		class |= NullError
	}
	choices, _ := top["choices"].([]any)
	for _, c := range choices {
		choice, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if f, ok := choice["finish_reason"]; ok && f != nil {
			class |= Finish
		}
		output := nonEmptyString(choice["text"])
		for _, key := range []string{"delta", "message"} {
			d, ok := choice[key].(map[string]any)
			if !ok {
				continue
			}
			for _, k := range []string{"content", "reasoning_content", "reasoning"} {
				output = output || nonEmptyString(d[k])
			}
			if calls, ok := d["tool_calls"].([]any); ok && len(calls) > 0 {
				output = true
				class |= ToolCalls
			}
		}
		if output {
			class |= Output
			count++
		}
	}
	return class, count
}

func nonEmptyString(v any) bool {
	s, ok := v.(string)
	return ok && s != ""
}

// hasDuplicateKeys reports whether any object in valid JSON repeats a key.
// The reference keeps only the last of repeated keys while Classify honours
// every occurrence; such input is not something an engine sends.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object    bool
		expectKey bool
		seen      map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if k, ok := tok.(string); ok {
				if top.seen[k] {
					return true
				}
				top.seen[k] = true
				top.expectKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, expectKey: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, tc := range streamCases {
		var d Decoder
		d.Append([]byte(tc.stream))
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			if e.Data != nil {
				f.Add(bytes.Clone(e.Data))
			}
		}
	}
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"\u0000"}}]}`,
		`{"error":null,"object":"error"}`,
		`{"usage":1,"error":false}`,
		`{"choices":[{"message":{"tool_calls":[{}]},"finish_reason":0}]}`,
		`[{"choices":[]}]`,
		` {"a" : [ 1 , { } , "\"" ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		class, count := Classify(data), Count(data)
		if !json.Valid(data) {
			if string(data) != "[DONE]" && class != Malformed {
				t.Fatalf("Classify(%q) = %v for invalid JSON", data, class)
			}
			return
		}
		if hasDuplicateKeys(data) {
			return
		}
		wantClass, wantCount := referenceClassify(data)
		if class != wantClass || count != wantCount {
			t.Fatalf("Classify(%q) = %v, %d; reference says %v, %d", data, class, count, wantClass, wantCount)
		}
	})
}

// FuzzDecoderSplit checks that where a stream is split never changes the
// data, names and classes of the events it decodes to.
func FuzzDecoderSplit(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.stream), uint16(len(tc.stream)/2))
	}
	f.Fuzz(func(t *testing.T, stream []byte, at uint16) {
		split := int(at) % (len(stream) + 1)
		decode := func(chunks ...[]byte) []gotEvent {
			var d Decoder
			var got []gotEvent
			for _, c := range chunks {
				d.Append(c)
				for {
					e, ok := d.Next()
					if !ok {
						break
					}
					g := copyEvent(e)
					g.raw = ""
					got = append(got, g)
				}
			}
			return got
		}
		whole := decode(stream)
		parts := decode(stream[:split], stream[split:])
		if len(whole) != len(parts) {
			t.Fatalf("split at %d: %d events, whole stream gives %d", split, len(parts), len(whole))
		}
		for i := range whole {
			if whole[i].String() != parts[i].String() {
				t.Fatalf("split at %d, event %d: %v, whole stream gives %v", split, i, parts[i], whole[i])
			}
		}
	})
}
