package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunkTexts returns the text of every content chunk of a stream, in order.
func chunkTexts(t *testing.T, events []string) (texts []string, indexes []int) {
	t.Helper()
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		for _, ch := range decodeChunk(t, ev).Choices {
			if text, ok := ch.textOf(); ok && ch.FinishReason == nil {
				texts = append(texts, text)
				indexes = append(indexes, ch.Index)
			}
		}
	}
	return texts, indexes
}

func TestStreamIntervalGroupsTokens(t *testing.T) {
	s := startSim(t, Config{Name: "iv", StreamInterval: 3})
	prompt := RenderChat([]Message{{Role: "user", Content: "chunks"}})
	words := Tokens("iv", 0, prompt, 8)
	events := streamEvents(t, s, "/v1/chat/completions", chatRequest("chunks", map[string]any{"max_tokens": 8, "ignore_eos": true}), nil)
	texts, _ := chunkTexts(t, events)
	// vLLM: the first token alone, then 3 at a time, then the rest.
	want := []string{words[0], strings.Join(words[1:4], ""), strings.Join(words[4:7], ""), words[7]}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("chunks %q, want %q", texts, want)
	}
	if len(events) != 1+4+1+1 {
		t.Errorf("%d events, want role, 4 chunks, finish, [DONE]: %q", len(events), events)
	}
	if rec := waitRecord(t, s, ended); rec.TokensSent != 8 {
		t.Errorf("record = %+v", rec)
	}

	// Completions chunk the same way.
	events = streamEvents(t, s, "/v1/completions", map[string]any{"model": "sim-model", "prompt": "p", "max_tokens": 4, "ignore_eos": true}, nil)
	texts, _ = chunkTexts(t, events)
	words = Tokens("iv", 0, "p", 4)
	if want := []string{words[0], strings.Join(words[1:4], "")}; strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("completion chunks %q, want %q", texts, want)
	}
}

func TestStreamIntervalPerChoice(t *testing.T) {
	s := startSim(t, Config{Name: "iv", StreamInterval: 2})
	events := streamEvents(t, s, "/v1/chat/completions", chatRequest("two", map[string]any{"n": 2, "max_tokens": 4, "ignore_eos": true}), nil)
	texts, indexes := chunkTexts(t, events)
	prompt := RenderChat([]Message{{Role: "user", Content: "two"}})
	// Each choice keeps its own count, as each vLLM child request does:
	// step 0 sends both first tokens, step 2 both pairs, step 3 both rests.
	var got []string
	for i := range texts {
		got = append(got, string(rune('0'+indexes[i]))+":"+texts[i])
	}
	var want []string
	c0, c1 := Tokens("iv", 0, prompt, 4), Tokens("iv", 1, prompt, 4)
	for _, part := range [][2]int{{0, 1}, {1, 3}, {3, 4}} {
		want = append(want, "0:"+strings.Join(c0[part[0]:part[1]], ""), "1:"+strings.Join(c1[part[0]:part[1]], ""))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunks\n got %q\nwant %q", got, want)
	}
}

func TestStreamIntervalMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{StreamInterval: 3})
	compareStream(t, "vllm_chat_stream_interval3.sse", streamEvents(t, s, "/v1/chat/completions", chatRequest("x", map[string]any{"max_tokens": 5, "ignore_eos": true}), nil))
}

// TestStreamIntervalFaultPoints checks where token faults fire when a chunk
// carries several tokens (interval 3, max_tokens 6: chunks of tokens 0,
// 1-3, 4-5).
func TestStreamIntervalFaultPoints(t *testing.T) {
	cases := []struct {
		spec           string
		chunks         int // content chunks the client got
		computed, sent int
	}{
		{"computed:0", 0, 1, 0},
		{"computed:2", 1, 3, 1}, // token 1 waits for its chunk and is never sent
		{"sent:0", 1, 1, 1},
		{"sent:1", 2, 4, 4}, // fires once the chunk with tokens 1-3 is out
		{"sent:3", 2, 4, 4},
		{"sent:4", 3, 6, 6},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			s := startSim(t, Config{StreamInterval: 3})
			o := observe(testContext(t), newClient(t), faultRequest(t, s, "status:500@"+c.spec), nil)
			texts, _ := chunkTexts(t, o.events[:len(o.events)-1])
			if len(texts) != c.chunks {
				t.Errorf("client got %d chunks, want %d: %q", len(texts), c.chunks, o.events)
			}
			if rec := s.Records()[0]; rec.TokensComputed != c.computed || rec.TokensSent != c.sent {
				t.Errorf("record computed %d sent %d, want %d and %d", rec.TokensComputed, rec.TokensSent, c.computed, c.sent)
			}
		})
	}
}

func TestStreamIntervalIgnoredWithoutStream(t *testing.T) {
	s := startSim(t, Config{Name: "iv", StreamInterval: 4})
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": "p", "max_tokens": 3, "ignore_eos": true}), nil)
	if status != http.StatusOK || !strings.Contains(string(b), strings.Join(Tokens("iv", 0, "p", 3), "")) {
		t.Errorf("status %d: %s", status, b)
	}
	if _, err := Start(Config{StreamInterval: -1}); err == nil {
		t.Error("a negative StreamInterval was accepted")
	}
	cfg, err := parseFlags([]string{"--stream-interval", "5"}, io.Discard)
	if err != nil || cfg.StreamInterval != 5 {
		t.Errorf("--stream-interval 5: %+v, %v", cfg.StreamInterval, err)
	}
}
