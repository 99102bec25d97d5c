package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// referenceSummarize is Summarize written the slow, obvious way: decode with
// encoding/json into maps and walk them. It defines what Summarize must return,
// except for the usage span, which FuzzClassify checks against StripUsage and
// FuzzStripUsage against a decoder. skip is set when a number has an exponent too
// large for math/big to expand quickly; such input is not compared.
func referenceSummarize(data []byte) (sum Summary, skip bool) {
	if string(data) == "[DONE]" {
		return Summary{Class: Done, CompletionTokens: -1}, false
	}
	if !json.Valid(data) {
		return Summary{Class: Malformed, CompletionTokens: -1}, false
	}
	// UseNumber: a number too large for a float64 is still valid JSON, and
	// counts are compared exactly.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(fmt.Sprintf("valid JSON %q does not decode: %v", data, err))
	}
	sum.CompletionTokens = -1
	sum.Choice = -1
	top, ok := v.(map[string]any)
	if !ok {
		return sum, false
	}
	if u, ok := top["usage"].(map[string]any); ok && u != nil {
		sum.Class |= Usage
		if n, ok := u["completion_tokens"].(json.Number); ok {
			v, whole, huge := referenceWhole(n)
			skip = skip || huge
			if whole && v <= maxCount {
				sum.CompletionTokens = int(v)
			}
		}
	}
	if e, ok := top["error"]; ok && e != nil {
		sum.Class |= Error
	}
	if top["object"] == "error" {
		sum.Class |= Error
	}
	if e, ok := top["error"]; ok && e == nil && sum.Class&Error == 0 {
		sum.Class |= NullError
	}
	choices, _ := top["choices"].([]any)
	objects := 0
	for pos, c := range choices {
		choice, ok := c.(map[string]any)
		if !ok {
			continue
		}
		// Choice: the only choice object's index when it is a whole number no larger than
		// maxCount, else its position; -1 with none or several.
		if objects++; objects == 1 {
			sum.Choice = pos
			if n, ok := choice["index"].(json.Number); ok {
				v, whole, huge := referenceWhole(n)
				skip = skip || huge
				if whole && v <= maxCount {
					sum.Choice = int(v)
				}
			}
		} else {
			sum.Choice = -1
		}
		if f, ok := choice["finish_reason"]; ok && f != nil {
			sum.Class |= Finish
			index := int64(pos)
			if n, ok := choice["index"].(json.Number); ok {
				v, whole, huge := referenceWhole(n)
				skip = skip || huge
				if whole {
					index = v
				}
			}
			if index < 64 {
				sum.Finished |= 1 << index
			} else {
				sum.FinishedHigh++
			}
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
				sum.Class |= ToolCalls
			}
		}
		if output {
			sum.Class |= Output
			sum.Outputs++
		}
	}
	return sum, skip
}

// referenceWhole decides with exact rational arithmetic whether a number is what
// Summary calls a non-negative integer, and returns its value, capped at
// maxCount+1. huge is set (and nothing decided) when the exponent is too large to
// expand.
func referenceWhole(n json.Number) (v int64, whole, huge bool) {
	text := n.String()
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		e, err := strconv.Atoi(text[i+1:])
		if err != nil || e > 10000 || e < -10000 {
			return 0, false, true
		}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		panic(fmt.Sprintf("json.Number %q is not a number", text))
	}
	if r.Sign() < 0 || !r.IsInt() {
		return 0, false, false
	}
	if r.Num().Cmp(big.NewInt(maxCount)) > 0 {
		return maxCount + 1, true, false
	}
	return r.Num().Int64(), true, false
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
		`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
		`{"choices":[{"index":7,"delta":{},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":01,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":1.0,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":9007199254740993,"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":123456789012345678,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"index":70,"finish_reason":"length"}]}`,
		`{"choices":[{"index":0,"delta":"x","finish_reason":"stop"}]}`,
		`{"choices":[{"index":3,"delta":{"content":""},"delta":{"tool_calls":[{}]}},{"index":0,"delta":{}}]}`,
		`{"choices":[{"index":-1,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":2,"delta":{`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}}`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null},{"index":1,"delta":{},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null,"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":04}}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4.5}}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":1234567890123456}}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4},"usage":null}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"x":1}}`,
		`{"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`,
		`{"usage":{"prompt_tokens":-5,"total_tokens":9,"completion_tokens":4}}`,
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
		want, skip := referenceSummarize(data)
		if class != want.Class || count != want.Outputs {
			t.Fatalf("Classify(%q) = %v, %d; reference says %v, %d", data, class, count, want.Class, want.Outputs)
		}
		if skip {
			return
		}
		sum := Summarize(data)
		if sum.Choice != want.Choice {
			t.Fatalf("Summarize(%q) = choice %d; reference says %d", data, sum.Choice, want.Choice)
		}
		if sum.Finished != want.Finished || sum.FinishedHigh != want.FinishedHigh || sum.CompletionTokens != want.CompletionTokens {
			t.Fatalf("Summarize(%q) = finished %#x+%d, %d tokens; reference says %#x+%d, %d tokens",
				data, sum.Finished, sum.FinishedHigh, sum.CompletionTokens, want.Finished, want.FinishedHigh, want.CompletionTokens)
		}
		// With no repeated keys there is at most one usage member, and cutting
		// its span is exactly what StripUsage does.
		if stripped := StripUsage(nil, data); sum.UsageEnd == 0 {
			if sum.UsageStart != 0 || !bytes.Equal(stripped, data) {
				t.Fatalf("Summarize(%q) finds no usage but StripUsage gives %q", data, stripped)
			}
		} else if cut := append(data[:sum.UsageStart:sum.UsageStart], data[sum.UsageEnd:]...); !bytes.Equal(cut, stripped) {
			t.Fatalf("Summarize(%q) cuts %d:%d, giving %q; StripUsage gives %q", data, sum.UsageStart, sum.UsageEnd, cut, stripped)
		}
	})
}

func FuzzStripUsage(f *testing.F) {
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
		`{"usage":null}`,
		` { "usage" : 1 , "id" : "x" } `,
		`{"id":"x","us\u0061ge":{"completion_tokens":4}, "b":[1,{"usage":null}]}`,
		`{"usage":1,"usage":2,"id":3,"usage":4}`,
		`[{"usage":null}]`,
		`{"usage":null,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		out := StripUsage([]byte("data: "), data)
		if !bytes.Equal(data, orig) {
			t.Fatalf("StripUsage modified its input %q to %q", orig, data)
		}
		if !bytes.HasPrefix(out, []byte("data: ")) {
			t.Fatalf("StripUsage(%q) lost dst: %q", data, out)
		}
		out = out[len("data: "):]
		if !json.Valid(data) {
			if !bytes.Equal(out, data) {
				t.Fatalf("StripUsage changed invalid %q to %q", data, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", data, out)
		}
		in, ok := decodeObject(data)
		if !ok {
			if !bytes.Equal(out, data) {
				t.Fatalf("StripUsage changed %q, not an object, to %q", data, out)
			}
			return
		}
		_, had := in["usage"]
		delete(in, "usage")
		if got, ok := decodeObject(out); !ok || !reflect.DeepEqual(in, got) {
			t.Fatalf("StripUsage(%q) = %q, want the members %v", data, out, in)
		}
		if !had && !bytes.Equal(out, data) {
			t.Fatalf("StripUsage(%q) = %q, but there is no usage to strip", data, out)
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
			var read []byte // one read buffer, overwritten between reads (see decodeChunks)
			for _, c := range chunks {
				read = append(read[:0], c...)
				d.Append(read)
				for {
					e, ok := d.Next()
					if !ok {
						break
					}
					g := copyEvent(e)
					g.raw = ""
					got = append(got, g)
				}
				for i := range read {
					read[i] = 'X'
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

// decodeObject decodes valid JSON and returns it when it is an object. Numbers
// stay as written: 1E1000 is valid JSON though no float64 holds it.
func decodeObject(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(fmt.Sprintf("valid JSON %q does not decode: %v", data, err))
	}
	m, ok := v.(map[string]any)
	return m, ok
}
