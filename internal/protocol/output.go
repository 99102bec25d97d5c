package protocol

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ResponsesOutput is what a client received of a Responses stream's output items, read
// from the events the gateway forwarded to it: each item as announced
// (response.output_item.added) or finished (response.output_item.done), and the text and
// arguments of its deltas. An interruption's response.failed carries it as the response's
// output, so a client that reads the terminal event sees the same message text, reasoning
// and function calls that the events before it delivered, rather than an empty output
// that says nothing was delivered (docs/errors.md).
type ResponsesOutput struct {
	items []*outputItem
}

// outputItem is one output item the client received. Its JSON is kept as the client got
// it (tool call ids already the request's own); parts are the text deltas of its content
// or summary parts.
type outputItem struct {
	index   int64
	item    []byte // the item of output_item.added, or of output_item.done once it came
	done    bool
	args    []byte // function_call_arguments deltas, JSON-escaped
	content []outputPart
	summary []outputPart
}

// outputPart is one content (or summary) part: its type and the text delivered so far.
type outputPart struct {
	index int64
	typ   string
	text  []byte // JSON-escaped
}

// Add reads one event the client received. Events that carry no output item are ignored;
// so is a delta for an item the client was never told of. data is not kept. It runs for
// every event of a Responses stream, so it reads the event's members in one pass without
// copying them, and keeps delta text as the JSON-escaped text it arrived as.
func (o *ResponsesOutput) Add(data []byte) {
	var ev outputEvent
	gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data))).ForEach(ev.member)
	switch ev.typ {
	case "response.output_item.added", "response.output_item.done":
		if !ev.item.IsObject() {
			return
		}
		it := o.at(ev.outputIndex, true)
		it.item = append(it.item[:0], ev.item.Raw...)
		it.done = ev.typ == "response.output_item.done"
	case "response.content_part.added":
		if it := o.at(ev.outputIndex, false); it != nil {
			// A copy: the event's data is not the shaper's to keep.
			part(&it.content, ev.contentIndex).typ = strings.Clone(ev.item.Get("type").String())
		}
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta":
		if it := o.at(ev.outputIndex, false); it != nil {
			p := part(&it.content, ev.contentIndex)
			if p.typ == "" {
				p.typ = partTypeOf(ev.typ)
			}
			p.text = appendEscaped(p.text, ev.delta)
		}
	case "response.reasoning_summary_text.delta":
		if it := o.at(ev.outputIndex, false); it != nil {
			p := part(&it.summary, ev.summaryIndex)
			p.typ = "summary_text"
			p.text = appendEscaped(p.text, ev.delta)
		}
	case "response.function_call_arguments.delta":
		if it := o.at(ev.outputIndex, false); it != nil {
			it.args = appendEscaped(it.args, ev.delta)
		}
	}
}

// outputEvent is what Add reads of an event; its strings point into the event's data.
type outputEvent struct {
	typ                                     string
	outputIndex, contentIndex, summaryIndex int64
	item                                    gjson.Result // the item, or the part of content_part.added
	delta                                   gjson.Result
}

func (ev *outputEvent) member(key, value gjson.Result) bool {
	switch key.Str {
	case "type":
		ev.typ = value.Str
	case "output_index":
		ev.outputIndex = value.Int()
	case "content_index":
		ev.contentIndex = value.Int()
	case "summary_index":
		ev.summaryIndex = value.Int()
	case "item", "part":
		ev.item = value
	case "delta":
		ev.delta = value
	}
	return true
}

// appendEscaped appends a JSON string's text as it is escaped in JSON, without its quotes:
// pieces appended so stay one valid JSON string's content.
func appendEscaped(dst []byte, s gjson.Result) []byte {
	if s.Type != gjson.String || len(s.Raw) < 2 {
		return dst
	}
	return append(dst, s.Raw[1:len(s.Raw)-1]...)
}

// partTypeOf is the content part type a delta event adds to.
func partTypeOf(delta string) string {
	switch delta {
	case "response.refusal.delta":
		return "refusal"
	case "response.reasoning_text.delta":
		return "reasoning_text"
	}
	return "output_text"
}

// at returns the item at output index i, made when create is set and it is new.
func (o *ResponsesOutput) at(i int64, create bool) *outputItem {
	for _, it := range o.items {
		if it.index == i {
			return it
		}
	}
	if !create {
		return nil
	}
	it := &outputItem{index: i}
	o.items = append(o.items, it)
	slices.SortFunc(o.items, func(a, b *outputItem) int { return int(a.index - b.index) })
	return it
}

func part(parts *[]outputPart, i int64) *outputPart {
	for k := range *parts {
		if (*parts)[k].index == i {
			return &(*parts)[k]
		}
	}
	*parts = append(*parts, outputPart{index: i})
	slices.SortFunc(*parts, func(a, b outputPart) int { return int(a.index - b.index) })
	for k := range *parts {
		if (*parts)[k].index == i {
			return &(*parts)[k]
		}
	}
	return nil
}

// AppendJSON appends the output as a JSON array: finished items as the client received
// them, unfinished ones as announced with what their deltas delivered and status
// "incomplete", as OpenAI marks the items of a response cut short.
func (o *ResponsesOutput) AppendJSON(dst []byte) []byte {
	dst = append(dst, '[')
	for i, it := range o.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		if it.done {
			dst = append(dst, it.item...)
			continue
		}
		dst = append(dst, it.incomplete()...)
	}
	return append(dst, ']')
}

// incomplete is an unfinished item with what was delivered of it.
func (it *outputItem) incomplete() []byte {
	b := append([]byte(nil), it.item...)
	set := func(path string, raw []byte) {
		if out, err := sjson.SetRawBytes(b, path, raw); err == nil {
			b = out
		}
	}
	set("status", []byte(`"incomplete"`))
	switch gjson.GetBytes(b, "type").String() {
	case "function_call", "custom_tool_call":
		set("arguments", quoted(it.args))
	case "message":
		set("content", appendParts(nil, it.content))
	case "reasoning":
		if len(it.content) > 0 {
			set("content", appendParts(nil, it.content))
		}
		if len(it.summary) > 0 {
			set("summary", appendParts(nil, it.summary))
		}
	}
	return b
}

// quoted is escaped text (appendEscaped) as a JSON string.
func quoted(escaped []byte) []byte {
	return append(append(append(make([]byte, 0, len(escaped)+2), '"'), escaped...), '"')
}

// appendParts appends content parts in the shapes of OpenAI's output_text, refusal,
// reasoning_text and summary_text.
func appendParts(dst []byte, parts []outputPart) []byte {
	dst = append(dst, '[')
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = openai.AppendString(dst, p.typ)
		switch p.typ {
		case "refusal":
			dst = append(append(dst, `,"refusal":`...), quoted(p.text)...)
		case "output_text":
			dst = append(append(dst, `,"text":`...), quoted(p.text)...)
			dst = append(dst, `,"annotations":[]`...)
		default:
			dst = append(append(dst, `,"text":`...), quoted(p.text)...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
