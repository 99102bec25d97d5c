package sim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestTokensDeterministic(t *testing.T) {
	a := Tokens("a", 0, "prompt", 40)
	if !reflect.DeepEqual(a, Tokens("a", 0, "prompt", 40)) {
		t.Error("same salt, seed and prompt gave different tokens")
	}
	if !reflect.DeepEqual(a[:10], Tokens("a", 0, "prompt", 10)) {
		t.Error("a shorter request is not a prefix of a longer one")
	}
	for name, other := range map[string][]string{
		"salt":   Tokens("b", 0, "prompt", 40),
		"seed":   Tokens("a", 1, "prompt", 40),
		"prompt": Tokens("a", 0, "prompt!", 40),
	} {
		same := 0
		for i := range a {
			if a[i] == other[i] {
				same++
			}
		}
		if same > 8 { // 40 draws from 64 words agree by chance less than once on average
			t.Errorf("changing the %s left %d of 40 tokens equal", name, same)
		}
	}
	for _, tok := range a {
		if !strings.HasPrefix(tok, " ") || len(tok) < 2 {
			t.Errorf("token %q lacks its leading space", tok)
		}
	}
	for _, salt := range []string{"a", "b", "replica-1", "replica-2"} {
		for _, p := range []string{"", "x", "a longer prompt"} {
			if n := NaturalLength(salt, 0, p); n < minNaturalLength || n > maxNaturalLength {
				t.Errorf("NaturalLength(%q, %q) = %d", salt, p, n)
			}
		}
	}
}

// streamText runs one chat stream and returns its concatenated content.
func streamText(t *testing.T, s *Server, extra map[string]any) string {
	t.Helper()
	extra["stream"] = true
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("determinism", extra)), nil)
	o := observe(testContext(t), newClient(t), req, nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	var text strings.Builder
	for _, ev := range o.events[:len(o.events)-1] {
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunk.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	return text.String()
}

func TestReplicaOutputDeterminism(t *testing.T) {
	a := startSim(t, Config{Name: "a"})
	b := startSim(t, Config{Name: "b"})
	prompt := RenderChat([]Message{{Role: "user", Content: "determinism"}})
	greedy := map[string]any{"max_tokens": 8}

	textA := streamText(t, a, map[string]any{"max_tokens": 8})
	if want := strings.Join(Tokens("a", 0, prompt, 8), ""); textA != want {
		t.Errorf("replica a wrote %q, Tokens predicts %q", textA, want)
	}
	if again := streamText(t, a, map[string]any{"max_tokens": 8, "temperature": 0}); again != textA {
		t.Errorf("temperature 0 is not deterministic: %q then %q", textA, again)
	}
	if textB := streamText(t, b, greedy); textB == textA {
		t.Errorf("replicas a and b wrote the same text %q", textA)
	}

	seeded := func() string { return streamText(t, a, map[string]any{"max_tokens": 8, "temperature": 1, "seed": 42}) }
	s1 := seeded()
	if s1 != seeded() || s1 != strings.Join(Tokens("a", 42, prompt, 8), "") {
		t.Errorf("seeded sampling is not reproducible")
	}
	sampled := func() string { return streamText(t, a, map[string]any{"max_tokens": 8, "temperature": 1}) }
	if sampled() == sampled() {
		t.Error("sampling without a seed gave the same text twice") // 64^-8 by chance
	}
}

func TestTokenizer(t *testing.T) {
	cases := map[string][]string{
		"Hello, world!":                  {"Hello", ",", "world", "!"},
		"  spaced\tout\n":                {"spaced", "out"},
		"<|im_start|>user\nHi<|im_end|>": {"<|im_start|>", "user", "Hi", "<|im_end|>"},
		"a<|not special":                 {"a", "<", "|", "not", "special"},
		"héllo wörld 42":                 {"héllo", "wörld", "42"},
	}
	for text, want := range cases {
		var got []string
		forEachPiece(text, func(p string) { got = append(got, p) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pieces of %q = %q, want %q", text, got, want)
		}
		if n := len(tokenIDs(text)); n != len(want) {
			t.Errorf("tokenIDs(%q) has %d ids, want %d", text, n, len(want))
		}
	}
	if tokenIDs("<|im_start|>")[0] != imStartID || tokenIDs("<|im_end|>")[0] != imEndID {
		t.Error("template markers do not have their fixed ids")
	}
}

func TestRenderChat(t *testing.T) {
	got := RenderChat([]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}})
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("RenderChat = %q, want %q", got, want)
	}
	// Content plus 3 template tokens per message, and 2 for the generation
	// prompt: "Be", "brief", "." and "Hi".
	if n := len(tokenIDs(got)); n != (3+3)+(1+3)+2 {
		t.Errorf("rendered chat has %d tokens", n)
	}
}

func TestChatContentParts(t *testing.T) {
	s := startSim(t, Config{})
	parts := []map[string]any{{"type": "text", "text": "first"}, {"type": "image_url", "image_url": map[string]any{"url": "x"}}, {"type": "text", "text": "second"}}
	body := jsonBody(t, map[string]any{"model": "sim-model", "messages": []map[string]any{{"role": "user", "content": parts}}, "max_tokens": 1})
	status, _ := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", body, nil)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	want := len(tokenIDs(RenderChat([]Message{{Role: "user", Content: "first\nsecond"}})))
	if rec := waitRecord(t, s, ended); rec.PromptTokens != want {
		t.Errorf("prompt tokens = %d, want %d (text parts joined)", rec.PromptTokens, want)
	}
}
