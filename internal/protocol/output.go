package protocol

import (
	"slices"

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
	args    []byte // function_call_arguments deltas
	content []outputPart
	summary []outputPart
}

// outputPart is one content (or summary) part: its type and the text delivered so far.
type outputPart struct {
	index int64
	typ   string
	text  []byte
}

// Add reads one event the client received. Events that carry no output item are ignored;
// so is a delta for an item the client was never told of. data is not kept.
func (o *ResponsesOutput) Add(data []byte) {
	typ := gjson.GetBytes(data, "type").String()
	switch typ {
	case "response.output_item.added", "response.output_item.done":
		r := gjson.GetManyBytes(data, "output_index", "item")
		if !r[1].IsObject() {
			return
		}
		it := o.at(r[0].Int(), true)
		it.item = append(it.item[:0], r[1].Raw...)
		it.done = typ == "response.output_item.done"
	case "response.content_part.added":
		r := gjson.GetManyBytes(data, "output_index", "content_index", "part.type")
		if it := o.at(r[0].Int(), false); it != nil {
			part(&it.content, r[1].Int()).typ = r[2].String()
		}
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta":
		r := gjson.GetManyBytes(data, "output_index", "content_index", "delta")
		if it := o.at(r[0].Int(), false); it != nil {
			p := part(&it.content, r[1].Int())
			if p.typ == "" {
				p.typ = partTypeOf(typ)
			}
			p.text = append(p.text, r[2].String()...)
		}
	case "response.reasoning_summary_text.delta":
		r := gjson.GetManyBytes(data, "output_index", "summary_index", "delta")
		if it := o.at(r[0].Int(), false); it != nil {
			p := part(&it.summary, r[1].Int())
			p.typ = "summary_text"
			p.text = append(p.text, r[2].String()...)
		}
	case "response.function_call_arguments.delta":
		r := gjson.GetManyBytes(data, "output_index", "delta")
		if it := o.at(r[0].Int(), false); it != nil {
			it.args = append(it.args, r[1].String()...)
		}
	}
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
		set("arguments", openai.AppendString(nil, string(it.args)))
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
			dst = append(dst, `,"refusal":`...)
			dst = openai.AppendString(dst, string(p.text))
		case "output_text":
			dst = append(dst, `,"text":`...)
			dst = openai.AppendString(dst, string(p.text))
			dst = append(dst, `,"annotations":[]`...)
		default:
			dst = append(dst, `,"text":`...)
			dst = openai.AppendString(dst, string(p.text))
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
