package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// A request with --prompt-bytes carries a conversation before its prompt, as a
// long-running agent's requests do: a system prompt, turns of prose a few KiB long,
// and every few turns a tool call with its result (code, with the quotes, tabs and
// newlines that JSON escapes). The same size gives the same bytes on every run (a
// fixed seed), so two targets get exactly the same load.

// conversationSeed fixes the conversation's text.
const conversationSeed = 22

// history returns the turns (chat, Messages) or input items (Responses) that fill
// about budget bytes of JSON — not more, with their commas — and the system prompt to
// send with them (Messages; the others carry it as their first turn). A completions
// prompt gets the conversation's text as one string (longPrompt).
func history(api API, budget int) (system string, items []json.RawMessage) {
	if budget <= 0 {
		return "", nil
	}
	g := textGen{rng: rand.New(rand.NewPCG(conversationSeed, uint64(api)))}
	system = g.prose(1500)
	used := len(mustJSON(system)) + len(`,"system":`)
	if api == Chat || api == Responses {
		role := "system"
		if api == Responses {
			role = "developer"
		}
		items = append(items, mustJSON(map[string]any{"role": role, "content": system}))
		used = len(items[0]) + 1
		system = ""
	}
	if used > budget {
		return "", nil
	}
	for turn := 0; ; turn++ {
		var next []json.RawMessage
		if turn%4 == 3 {
			next = g.toolExchange(api, turn)
		} else {
			next = g.proseExchange(api, turn)
		}
		size := 0
		for _, it := range next {
			size += len(it) + 1
		}
		if used+size > budget {
			break
		}
		items = append(items, next...)
		used += size
	}
	return system, items
}

// longPrompt is a completions prompt's text before the prompt itself: prose of about n
// bytes of JSON.
func longPrompt(n int) string {
	g := textGen{rng: rand.New(rand.NewPCG(conversationSeed, uint64(Completions)))}
	return g.prose(n - n/16) // newlines are written as \n: two bytes each
}

// textGen writes the conversation's text.
type textGen struct{ rng *rand.Rand }

var proseWords = strings.Fields(`the a of to and in that is for it with as was on be by this are from at or an
request replica gateway engine stream token prompt answer failover lease journal
client server latency budget retry fence agent model context window cache prefix
measure number because without between before after while again through every
café naïve über 東京 数据 résumé façade`)

// prose is about n bytes of sentences in paragraphs.
func (g *textGen) prose(n int) string {
	var b strings.Builder
	for b.Len() < n {
		words := 6 + g.rng.IntN(14)
		for i := 0; i < words; i++ {
			w := proseWords[g.rng.IntN(len(proseWords))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		b.WriteString(". ")
		if g.rng.IntN(6) == 0 {
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// code is about n bytes of a source file, as a tool returns it.
func (g *textGen) code(n int) string {
	var b strings.Builder
	for i := 1; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%d\tfunc step%d(ctx context.Context, in *Input) (string, error) {\n", i, g.rng.IntN(1000))
		fmt.Fprintf(&b, "\t\tif err := check(in, \"field_%d\"); err != nil {\n\t\t\treturn \"\", fmt.Errorf(\"step: %%w\", err)\n\t\t}\n", g.rng.IntN(100))
		b.WriteString("\t\treturn `done`, nil // \\ escaped <tag> & more\n\t}\n")
	}
	return b.String()
}

func (g *textGen) proseExchange(api API, turn int) []json.RawMessage {
	question, answer := g.prose(1000+g.rng.IntN(4000)), g.prose(500+g.rng.IntN(2500))
	switch api {
	case Messages:
		return []json.RawMessage{
			mustJSON(map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": question}}}),
			mustJSON(map[string]any{"role": "assistant", "content": answer}),
		}
	case Responses:
		return []json.RawMessage{
			mustJSON(map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": question}}}),
			mustJSON(map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": answer}}}),
		}
	}
	user := any(question)
	if turn%2 == 1 {
		user = []any{map[string]any{"type": "text", "text": question}}
	}
	return []json.RawMessage{
		mustJSON(map[string]any{"role": "user", "content": user}),
		mustJSON(map[string]any{"role": "assistant", "content": answer}),
	}
}

func (g *textGen) toolExchange(api API, turn int) []json.RawMessage {
	id := fmt.Sprintf("call_%04d", turn)
	args := map[string]any{"path": fmt.Sprintf("internal/pkg%d/file.go", turn), "lines": []int{1, 200}}
	argText := string(mustJSON(args))
	result := g.code(2000 + g.rng.IntN(6000))
	switch api {
	case Messages:
		return []json.RawMessage{
			mustJSON(map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Reading the file."},
				map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": args}}}),
			mustJSON(map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": id, "content": result}}}),
		}
	case Responses:
		return []json.RawMessage{
			mustJSON(map[string]any{"type": "function_call", "call_id": id, "name": "read_file", "arguments": argText}),
			mustJSON(map[string]any{"type": "function_call_output", "call_id": id, "output": result}),
		}
	}
	return []json.RawMessage{
		mustJSON(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": argText}}}}),
		mustJSON(map[string]any{"role": "tool", "tool_call_id": id, "content": result}),
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings, numbers and slices always encode
	}
	return b
}
