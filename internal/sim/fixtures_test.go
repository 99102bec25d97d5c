package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// loadSSEFixture returns the data payloads of a testdata .sse file in order,
// skipping SSE comment lines.
func loadSSEFixture(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if payload, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, payload)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func loadJSONFixture(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// splitFinish rewrites vLLM's stream into the sim's convention for the end
// of a choice (testdata/README.md, rule 1): a chunk that carries both a
// choice's last text and its finish_reason becomes a text chunk with
// finish_reason null and a finish chunk with an empty delta. Both keep the
// chunk's continuous usage, if any.
func splitFinish(t *testing.T, events []string) []string {
	t.Helper()
	var out []string
	for _, ev := range events {
		if ev == "[DONE]" {
			out = append(out, ev)
			continue
		}
		m := decodeEvent(t, ev)
		choices, _ := m["choices"].([]any)
		if len(choices) != 1 {
			out = append(out, ev)
			continue
		}
		ch := choices[0].(map[string]any)
		delta, _ := ch["delta"].(map[string]any)
		if ch["finish_reason"] == nil || (ch["delta"] != nil && len(delta) == 0) || ch["text"] == "" {
			// Not a finish chunk, or one that carries nothing more: vLLM
			// sends the sim's shape already.
			out = append(out, ev)
			continue
		}
		last := cloneJSON(t, m)
		lastChoice := last["choices"].([]any)[0].(map[string]any)
		lastChoice["finish_reason"] = nil
		if _, chat := lastChoice["delta"]; chat {
			// vLLM's chat chunks carry stop_reason only with a finish reason;
			// completion chunks always do.
			delete(lastChoice, "stop_reason")
		}
		fin := cloneJSON(t, m)
		finChoice := fin["choices"].([]any)[0].(map[string]any)
		if _, chat := finChoice["delta"]; chat {
			finChoice["delta"] = map[string]any{}
		} else {
			finChoice["text"] = ""
		}
		out = append(out, encodeJSON(t, last), encodeJSON(t, fin))
	}
	return out
}

func cloneJSON(t *testing.T, m map[string]any) map[string]any {
	var c map[string]any
	if err := json.Unmarshal([]byte(encodeJSON(t, m)), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func encodeJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shapeDiff lists how the sim's value differs in structure from vLLM's
// (testdata/README.md, rules 2 and 3): keys the sim sends that vLLM does
// not, non-null vLLM keys the sim lacks, JSON types that differ, array
// lengths, and choice indexes and finish reasons that differ.
func shapeDiff(path string, sim, vllm any) []string {
	return shapeDiffValues(path, sim, vllm, choiceValueKeys)
}

// choiceValueKeys are the keys whose values, not only types, a chat or
// completion chunk must share with vLLM's.
var choiceValueKeys = map[string]bool{"index": true, "finish_reason": true}

// shapeDiffValues is shapeDiff with the keys whose values must be equal
// given by valueKeys.
func shapeDiffValues(path string, sim, vllm any, valueKeys map[string]bool) []string {
	switch v := vllm.(type) {
	case map[string]any:
		s, ok := sim.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: sim has %T, vLLM an object", path, sim)}
		}
		var diffs []string
		for _, k := range sortedKeys(s) {
			if _, ok := v[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: sent by the sim, not by vLLM", path, k))
			}
		}
		for _, k := range sortedKeys(v) {
			sv, ok := s[k]
			if !ok {
				if v[k] != nil {
					diffs = append(diffs, fmt.Sprintf("%s.%s: sent by vLLM, not by the sim", path, k))
				}
				continue
			}
			if valueKeys[k] {
				if !reflect.DeepEqual(sv, v[k]) {
					diffs = append(diffs, fmt.Sprintf("%s.%s: sim %v, vLLM %v", path, k, sv, v[k]))
				}
				continue
			}
			diffs = append(diffs, shapeDiffValues(path+"."+k, sv, v[k], valueKeys)...)
		}
		return diffs
	case []any:
		s, ok := sim.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: sim has %T, vLLM an array", path, sim)}
		}
		if len(s) != len(v) {
			return []string{fmt.Sprintf("%s: sim has %d elements, vLLM %d", path, len(s), len(v))}
		}
		var diffs []string
		for i := range v {
			diffs = append(diffs, shapeDiffValues(fmt.Sprintf("%s[%d]", path, i), s[i], v[i], valueKeys)...)
		}
		return diffs
	default:
		if reflect.TypeOf(sim) != reflect.TypeOf(vllm) {
			return []string{fmt.Sprintf("%s: sim %T (%v), vLLM %T (%v)", path, sim, sim, vllm, vllm)}
		}
		return nil
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compareStream checks a sim stream against a vLLM fixture event by event.
func compareStream(t *testing.T, fixture string, got []string) {
	t.Helper()
	want := splitFinish(t, loadSSEFixture(t, fixture))
	if len(got) != len(want) {
		t.Fatalf("%s: the sim sent %d events, vLLM %d (after splitting finish chunks):\nsim:  %q\nvLLM: %q", fixture, len(got), len(want), got, want)
	}
	for i := range want {
		if want[i] == "[DONE]" || got[i] == "[DONE]" {
			if got[i] != want[i] {
				t.Errorf("%s event %d: sim %q, vLLM %q", fixture, i, got[i], want[i])
			}
			continue
		}
		for _, d := range shapeDiff("$", decodeEvent(t, got[i]), decodeEvent(t, want[i])) {
			t.Errorf("%s event %d: %s\nsim:  %s\nvLLM: %s", fixture, i, d, got[i], want[i])
		}
	}
}

// compareBody checks a sim response body against a vLLM .json fixture.
func compareBody(t *testing.T, fixture string, got []byte) {
	t.Helper()
	var sim any
	if err := json.Unmarshal(got, &sim); err != nil {
		t.Fatalf("sim body %s: %v", got, err)
	}
	for _, d := range shapeDiff("$", sim, loadJSONFixture(t, fixture)) {
		t.Errorf("%s: %s\nsim: %s", fixture, d, got)
	}
}

func TestShapeDiffCatchesDifferences(t *testing.T) {
	vllm := map[string]any{"a": 1.0, "b": nil, "c": []any{map[string]any{"index": 0.0}}}
	if d := shapeDiff("$", map[string]any{"a": 2.0, "c": []any{map[string]any{"index": 0.0}}}, vllm); d != nil {
		t.Errorf("a null vLLM field left out, values differing: %v, want no difference", d)
	}
	for _, sim := range []map[string]any{
		{"a": "x", "c": []any{map[string]any{"index": 0.0}}},                   // type
		{"c": []any{map[string]any{"index": 0.0}}},                             // missing key
		{"a": 1.0, "z": 1.0, "c": []any{map[string]any{"index": 0.0}}},         // extra key
		{"a": 1.0, "c": []any{map[string]any{"index": 1.0}}},                   // index
		{"a": 1.0, "c": []any{map[string]any{"index": 0.0}, map[string]any{}}}, // length
	} {
		if d := shapeDiff("$", map[string]any(sim), vllm); d == nil {
			t.Errorf("%v: no difference found", sim)
		}
	}
}
