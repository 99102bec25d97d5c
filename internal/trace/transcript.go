package trace

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// End says how what a client received ended.
type End string

const (
	// EndComplete: the API's own end (data: [DONE], message_stop, response.completed, or a
	// whole answer).
	EndComplete End = "complete"
	// EndError: an error (an error event after output, or an error answer).
	EndError End = "error"
	// EndCut: the bytes stop without either (a silent end).
	EndCut End = "cut"
)

// Transcript is what an answer says, whatever its API and framing: the text of each choice
// (content, reasoning, tool call names and arguments, in order), each choice's finish, and
// how the answer ended. Ids, timestamps and usage are left out, so a replay compares equal
// to the original when the model said the same thing.
type Transcript struct {
	Choices map[int]*strings.Builder
	Finish  map[int]string
	End     End
	// Hashed: part of the original was kept only as hashes, so its text is incomplete
	// from the first such chunk on.
	Hashed bool
}

func newTranscript() *Transcript {
	return &Transcript{Choices: map[int]*strings.Builder{}, Finish: map[int]string{}, End: EndCut}
}

func (t *Transcript) text(choice int) string {
	if b := t.Choices[choice]; b != nil {
		return b.String()
	}
	return ""
}

func (t *Transcript) add(choice int, s string) {
	if s == "" {
		return
	}
	b := t.Choices[choice]
	if b == nil {
		b = &strings.Builder{}
		t.Choices[choice] = b
	}
	b.WriteString(s)
}

// Read builds the transcript of what was received on path (the API's path, which decides
// how events are read).
func Read(path string, r Received) *Transcript {
	t := newTranscript()
	whole := !strings.Contains(r.ContentType, "text/event-stream")
	if r.Status != 0 && r.Status != 200 {
		t.End = EndError
		return t
	}
	for _, c := range r.Chunks {
		if !c.Kept() {
			t.Hashed = true
			break
		}
		if whole {
			readWhole(path, []byte(c.Text), t)
			continue
		}
		name, data := splitEvent(c.Text)
		readEvent(path, name, data, t)
	}
	return t
}

// splitEvent returns an event's name and its data (several data lines joined by '\n').
func splitEvent(ev string) (name string, data []byte) {
	var lines [][]byte
	for _, line := range strings.Split(strings.ReplaceAll(ev, "\r\n", "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, []byte(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")))
		}
	}
	return name, bytes.Join(lines, []byte("\n"))
}

func readEvent(path, name string, data []byte, t *Transcript) {
	if len(data) == 0 {
		return // a comment or keepalive
	}
	if string(data) == "[DONE]" {
		if t.End != EndError {
			t.End = EndComplete
		}
		return
	}
	j := gjson.ParseBytes(data)
	switch {
	case strings.HasSuffix(path, "/messages"):
		readMessagesEvent(j, t)
	case strings.HasSuffix(path, "/responses"):
		readResponsesEvent(name, j, t)
	default:
		if j.Get("error").Exists() && j.Get("error").Type != gjson.Null || j.Get("object").String() == "error" {
			t.End = EndError
			return
		}
		readChoices(j.Get("choices"), "delta", t)
	}
}

// readChoices adds chat or completion choices: their delta (or message) content,
// reasoning, tool calls, or completion text, and their finish.
func readChoices(choices gjson.Result, member string, t *Transcript) {
	choices.ForEach(func(_, c gjson.Result) bool {
		i := int(c.Get("index").Int())
		d := c.Get(member)
		t.add(i, d.Get("reasoning_content").String())
		t.add(i, d.Get("reasoning").String())
		t.add(i, d.Get("content").String())
		t.add(i, c.Get("text").String())
		d.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
			t.add(i, call.Get("function.name").String())
			t.add(i, call.Get("function.arguments").String())
			return true
		})
		if f := c.Get("finish_reason"); f.Type == gjson.String {
			t.Finish[i] = f.String()
		}
		return true
	})
}

func readMessagesEvent(j gjson.Result, t *Transcript) {
	switch j.Get("type").String() {
	case "content_block_start":
		t.add(0, j.Get("content_block.name").String())
	case "content_block_delta":
		d := j.Get("delta")
		t.add(0, d.Get("text").String())
		t.add(0, d.Get("thinking").String())
		t.add(0, d.Get("partial_json").String())
	case "message_delta":
		if s := j.Get("delta.stop_reason"); s.Type == gjson.String {
			t.Finish[0] = s.String()
		}
	case "message_stop":
		if t.End != EndError {
			t.End = EndComplete
		}
	case "error":
		t.End = EndError
	}
}

func readResponsesEvent(name string, j gjson.Result, t *Transcript) {
	typ := j.Get("type").String()
	if typ == "" {
		typ = name
	}
	switch typ {
	case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
		t.add(0, j.Get("delta").String())
	case "response.output_item.added":
		t.add(0, j.Get("item.name").String())
	case "response.completed":
		t.Finish[0] = j.Get("response.status").String()
		if t.End != EndError {
			t.End = EndComplete
		}
	case "response.incomplete":
		t.Finish[0] = "incomplete"
		if t.End != EndError {
			t.End = EndComplete
		}
	case "response.failed", "error":
		t.End = EndError
	}
}

// readWhole reads an answer that was not streamed.
func readWhole(path string, body []byte, t *Transcript) {
	j := gjson.ParseBytes(body)
	t.End = EndComplete
	switch {
	case strings.HasSuffix(path, "/messages"):
		j.Get("content").ForEach(func(_, c gjson.Result) bool {
			t.add(0, c.Get("text").String())
			t.add(0, c.Get("thinking").String())
			t.add(0, c.Get("name").String())
			if in := c.Get("input"); in.Exists() {
				t.add(0, in.Raw)
			}
			return true
		})
		if s := j.Get("stop_reason"); s.Type == gjson.String {
			t.Finish[0] = s.String()
		}
	case strings.HasSuffix(path, "/responses"):
		j.Get("output").ForEach(func(_, item gjson.Result) bool {
			t.add(0, item.Get("name").String())
			t.add(0, item.Get("arguments").String())
			item.Get("content").ForEach(func(_, c gjson.Result) bool {
				t.add(0, c.Get("text").String())
				return true
			})
			return true
		})
		t.Finish[0] = j.Get("status").String()
	case strings.HasSuffix(path, "/embeddings"):
		j.Get("data").ForEach(func(_, d gjson.Result) bool {
			t.add(int(d.Get("index").Int()), d.Get("embedding").Raw)
			return true
		})
	default:
		readChoices(j.Get("choices"), "message", t)
	}
}
