package openai

import (
	"bytes"
	"fmt"
	"strconv"
)

// intake is one pass over a request body. The top-level members are read in the
// order the body gives them; the few that carry the prompt (messages, input, prompt,
// system, instructions) are read by readers of their own, which check their elements
// and keep the pieces of the prompt; every other member is only validated, and its
// value's bytes kept in members for the checks that follow the scan (model, stream,
// n…, each small).
//
// A reader never stops the scan at a fault of the request (a message that is not an
// object…): it notes the first one in list.err, and the checks after the scan report
// it in their fixed order, once the whole body is known to be JSON.
//
// A reader for another member is added to the switch in member. The Responses tools,
// for example, would be read by a reader that goes through the array with nextElement
// and each tool's members with nextMember, looking at "type" and "server_label" (keyIs,
// stringValue) and validating the rest with value.
type intake struct {
	s       scanner
	ep      Endpoint
	members Members
	names   names
	object  bool // the body is an object

	// The prompt: system (Messages' system, Responses' instructions), then turns (the
	// messages, the input items, the prompts). tmp holds the content being read until
	// its message is complete.
	system, turns, tmp rendering
	list               list
}

// list is what the reader of messages, input or prompt found in its array.
type list struct {
	count int
	err   *Error // the first element at fault
	// Completions prompts and embeddings inputs: whether every element is a string,
	// a token id, or an array of token ids (null fits each).
	strs, ints, batches bool
}

// scan reads the whole body. Afterwards in.s.fail says whether it is JSON as the
// gateway accepts it, and in.object whether it is an object.
func (in *intake) scan() {
	s := &in.s
	c := s.peek()
	switch {
	case s.failed():
		return
	case c != '{':
		s.value()
	default:
		in.object = true
		start := s.i
		if !s.open() {
			return
		}
		// Room for what a chat request has (model, messages, stream, its options, a
		// limit, a temperature...): one allocation where growing from nothing took four.
		in.members = make([]Member, 0, 8)
		for s.nextMember(s.i == start+1) {
			name := keyString(s.key, s.keyLen)
			dup := in.names.seen(in.members, name)
			from := in.member(name, dup)
			in.members = append(in.members, Member{Name: name, Value: s.b[from:s.i], Offset: from})
		}
	}
	if s.failed() {
		return
	}
	if s.space(); s.i < len(s.b) {
		s.syntax(s.b[s.i], "after top-level value")
	}
}

// member reads the value of the top-level member name and returns where it starts.
func (in *intake) member(name string, dup bool) int {
	switch {
	case dup: // refused after the scan; its value is only validated
	case name == "messages" && (in.ep == Chat || in.ep == Messages):
		return in.messages()
	case name == "system" && in.ep == Messages:
		return in.systemContent()
	case name == "instructions" && in.ep == Responses:
		return in.instructions()
	case name == "input" && in.ep == Responses:
		return in.responsesInput()
	case name == "prompt" && in.ep == Completions, name == "input" && in.ep == Embeddings:
		return in.prompts()
	}
	return in.s.value()
}

// messages reads an array of messages (chat, Messages), each checked and rendered by
// chatTurn or anthropicTurn.
func (in *intake) messages() int {
	s := &in.s
	c := s.peek()
	start := s.i
	if s.failed() || c != '[' || !s.open() {
		s.value()
		return start
	}
	for s.nextElement(s.i == start+1) {
		i := in.list.count
		in.list.count++
		if s.peek() != '{' {
			from := s.value()
			in.noteErr(func() *Error { return typeError(fmt.Sprintf("messages[%d]", i), "an object", s.b[from:s.i]) })
			continue
		}
		t := in.turnValues()
		switch {
		case s.failed() || in.list.err != nil:
		case in.ep == Chat:
			in.chatTurn(i, &t)
		default:
			in.anthropicTurn(i, &t)
		}
	}
	return start
}

// noteErr keeps the first fault of the list's elements; the Error is only made for it.
func (in *intake) noteErr(mk func() *Error) {
	if in.list.err == nil && !in.s.failed() {
		in.list.err = mk()
	}
}

// chatTurn checks and renders a chat message: "role: content\n".
func (in *intake) chatTurn(i int, t *turnValues) {
	switch {
	case t.role == nil || isNull(t.role):
		param := messageParam(i)
		in.list.err = invalid(param+".role", "missing_required_parameter",
			fmt.Sprintf("Missing required parameter: '%s.role'.", param))
	case t.role[0] != '"':
		in.list.err = typeError(messageParam(i)+".role", "a string", t.role)
	default:
		in.renderTurn(t.role, t.roleLen)
	}
}

// anthropicTurn checks and renders a Messages turn: a user or assistant role and a
// content that is a string or content blocks.
func (in *intake) anthropicTurn(i int, t *turnValues) {
	switch {
	case t.role == nil || t.role[0] != '"' || !stringIs(t.role, t.roleLen, "user") && !stringIs(t.role, t.roleLen, "assistant"):
		param := messageParam(i)
		in.list.err = invalid(param+".role", "invalid_value",
			fmt.Sprintf("%s.role: Input should be 'user' or 'assistant'", param))
	case t.content == nil || isNull(t.content):
		param := messageParam(i)
		in.list.err = invalid(param+".content", "missing_required_parameter", param+".content: Field required")
	case t.content[0] != '"' && t.content[0] != '[':
		in.list.err = typeError(messageParam(i)+".content", "a string or an array of content blocks", t.content)
	default:
		in.renderTurn(t.role, t.roleLen)
	}
}

// messageParam names message i in an error.
func messageParam(i int) string { return "messages[" + strconv.Itoa(i) + "]" }

// renderTurn adds "role: content\n" to the turns, the content being in.tmp. role is
// a string of the body, or nil for an empty role.
func (in *intake) renderTurn(role []byte, n int) {
	if role != nil {
		in.turns.str(role, n)
	}
	in.turns.lit(": ")
	in.turns.addAll(&in.tmp)
	in.turns.lit("\n")
}

// turnValues is what a message or input item holds: its last role, type and content
// members (decoding into a map keeps the last of a key given twice), nil when absent,
// and the decoded lengths of role and type when they are strings. The content is
// rendered in in.tmp.
type turnValues struct {
	role, typ, content []byte
	roleLen, typLen    int
}

// turnValues reads the message object at s.i.
func (in *intake) turnValues() turnValues {
	s := &in.s
	var t turnValues
	// The content's pieces are placed after those of the turns before it, so the
	// turns' remaining room is all it may need.
	in.tmp.reset(in.turns.limit - in.turns.n)
	start := s.i
	if !s.open() {
		return t
	}
	for s.nextMember(s.i == start+1) {
		switch {
		case keyIs(s.key, s.keyLen, "role"):
			t.role, t.roleLen = in.valueLen()
		case keyIs(s.key, s.keyLen, "type"):
			t.typ, t.typLen = in.valueLen()
		case keyIs(s.key, s.keyLen, "content"):
			t.content = in.content(&in.tmp)
		default:
			s.value()
		}
	}
	return t
}

// valueLen reads a value and returns its bytes and, for a string, its decoded length.
func (in *intake) valueLen() ([]byte, int) {
	s := &in.s
	c := s.peek()
	start := s.i
	n := 0
	switch {
	case s.failed():
		return nil, 0
	case c == '"':
		n = s.str()
	default:
		s.value()
	}
	return s.b[start:s.i], n
}

// content reads a content value into r as writeContent renders it: a string, or the
// text parts of an array of parts; anything else renders nothing. It returns the
// value's bytes.
func (in *intake) content(r *rendering) []byte {
	s := &in.s
	r.reset(r.limit)
	c := s.peek()
	start := s.i
	switch {
	case s.failed():
		return nil
	case c == '"':
		n := s.str()
		r.str(s.b[start:s.i], n)
	case c == '[':
		if !in.parts(r) {
			r.reset(r.limit)
		}
	default:
		s.value()
	}
	return s.b[start:s.i]
}

// parts reads an array of content parts into r: the text of each part whose type is
// text, input_text, output_text or absent, joined with '\n'. Parts are decoded as
// encoding/json decodes them into a struct with fields Type string and Text *string:
// keys match case-insensitively, null leaves Type as it was and makes Text nil, a
// part that is null is empty, and any other mismatch (a part that is not an object, a
// type or text that is not a string) fails the whole array, which then renders
// nothing. It reports whether the array decoded.
func (in *intake) parts(r *rendering) bool {
	s := &in.s
	start := s.i
	if !s.open() {
		return false
	}
	ok, first := true, true
	for s.nextElement(s.i == start+1) {
		switch s.peek() {
		case '{':
			p, good := in.part()
			if ok = ok && good; ok && p.text != nil && p.textual() {
				if !first {
					r.lit("\n")
				}
				r.str(p.text, p.textLen)
				first = false
			}
		case 'n':
			s.value()
		default:
			s.value()
			ok = false
		}
	}
	return ok && !s.failed()
}

// contentPart is one decoded content part: its type and text, as strings of the body
// (nil when unset), and their decoded lengths.
type contentPart struct {
	typ, text       []byte
	typLen, textLen int
}

// textual reports whether the part's type is one whose text is the prompt's: "text"
// (chat, Messages), "input_text" and "output_text" (Responses), or none.
func (p contentPart) textual() bool {
	return p.typ == nil || p.typLen == 0 || stringIs(p.typ, p.typLen, "text") ||
		stringIs(p.typ, p.typLen, "input_text") || stringIs(p.typ, p.typLen, "output_text")
}

// part reads a part object; ok is false when it does not decode.
func (in *intake) part() (p contentPart, ok bool) {
	s := &in.s
	start := s.i
	if !s.open() {
		return p, false
	}
	ok = true
	for s.nextMember(s.i == start+1) {
		switch {
		case keyFolds(s.key, s.keyLen, "type"):
			v, n := in.valueLen()
			switch {
			case len(v) == 0:
			case v[0] == '"':
				p.typ, p.typLen = v, n
			case v[0] != 'n':
				ok = false
			}
		case keyFolds(s.key, s.keyLen, "text"):
			v, n := in.valueLen()
			switch {
			case len(v) == 0:
			case v[0] == '"':
				p.text, p.textLen = v, n
			case v[0] == 'n':
				p.text = nil
			default:
				ok = false
			}
		default:
			s.value()
		}
	}
	return p, ok
}

// systemContent reads Messages' system, rendered as "system: content\n".
func (in *intake) systemContent() int {
	in.tmp.reset(in.system.limit - in.system.n)
	v := in.content(&in.tmp)
	if len(v) > 0 && (v[0] == '"' || v[0] == '[') {
		in.system.lit("system: ")
		in.system.addAll(&in.tmp)
		in.system.lit("\n")
	}
	return in.s.i - len(v)
}

// instructions reads Responses' instructions, rendered as "system: instructions\n".
func (in *intake) instructions() int {
	v, n := in.valueLen()
	if len(v) > 0 && v[0] == '"' {
		in.system.lit("system: ")
		in.system.str(v, n)
		in.system.lit("\n")
	}
	return in.s.i - len(v)
}

// responsesInput reads Responses' input: a string, rendered "user: input\n", or input
// items, each rendered "role: content\n" (its type when it has no role).
func (in *intake) responsesInput() int {
	s := &in.s
	c := s.peek()
	start := s.i
	switch {
	case s.failed():
	case c == '"':
		n := s.str()
		in.turns.lit("user: ")
		in.turns.str(s.b[start:s.i], n)
		in.turns.lit("\n")
	case c == '[' && s.open():
		for s.nextElement(s.i == start+1) {
			i := in.list.count
			in.list.count++
			if s.peek() != '{' {
				from := s.value()
				in.noteErr(func() *Error { return typeError(fmt.Sprintf("input[%d]", i), "an object", s.b[from:s.i]) })
				continue
			}
			t := in.turnValues()
			if s.failed() || in.list.err != nil {
				continue
			}
			switch {
			case t.role != nil && t.role[0] == '"' && t.roleLen > 0:
				in.renderTurn(t.role, t.roleLen)
			case t.typ != nil && t.typ[0] == '"':
				in.renderTurn(t.typ, t.typLen)
			default:
				in.renderTurn(nil, 0)
			}
		}
	default:
		s.value()
	}
	return start
}

// prompts reads a completions prompt or an embeddings input: a string, or an array
// of strings (joined with '\n'), of token ids, or of arrays of token ids.
func (in *intake) prompts() int {
	s := &in.s
	c := s.peek()
	start := s.i
	switch {
	case s.failed():
	case c == '"':
		n := s.str()
		in.turns.str(s.b[start:s.i], n)
	case c == '[' && s.open():
		in.list.strs, in.list.ints, in.list.batches = true, true, true
		for s.nextElement(s.i == start+1) {
			if in.list.strs && in.list.count > 0 {
				in.turns.lit("\n")
			}
			in.list.count++
			switch s.peek() {
			case '"':
				v, n := in.valueLen()
				in.list.ints, in.list.batches = false, false
				if in.list.strs {
					in.turns.str(v, n)
				}
			case 'n': // "" as a string, 0 as a token id, no ids as a batch
				s.value()
			case '[':
				in.list.strs, in.list.ints = false, false
				if !in.tokenIDs() {
					in.list.batches = false
				}
			default:
				from := s.value()
				in.list.strs, in.list.batches = false, false
				in.list.ints = in.list.ints && isInt64(s.b[from:s.i])
			}
		}
		if !in.list.strs {
			in.turns.reset(in.turns.limit)
		}
	default:
		s.value()
	}
	return start
}

// tokenIDs reads an array and reports whether it holds only token ids (or nulls).
func (in *intake) tokenIDs() bool {
	s := &in.s
	start := s.i
	if !s.open() {
		return false
	}
	ok := true
	for s.nextElement(s.i == start+1) {
		from := s.value()
		v := s.b[from:s.i]
		ok = ok && (isNull(v) || isInt64(v))
	}
	return ok
}

// isInt64 reports whether a value decodes into an int64 as encoding/json decodes it:
// a number written without fraction or exponent, in range.
func isInt64(v []byte) bool {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	_, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil
}

// keyString decodes a member key the scanner read. A name the APIs define is the
// constant itself: a request's every top-level key would otherwise be an allocation.
func keyString(key []byte, n int) string {
	if n == len(key)-2 {
		raw := key[1 : len(key)-1]
		if name, ok := memberNames[string(raw)]; ok {
			return name
		}
		return string(raw)
	}
	return unquote(key)
}

// memberNames are the top-level and stream_options member names of the four APIs'
// requests that clients send most, each mapped to itself.
var memberNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"model", "messages", "stream", "max_tokens", "max_completion_tokens", "temperature",
		"top_p", "top_k", "n", "stop", "seed", "user", "stream_options", "include_usage",
		"continuous_usage_stats", "tools", "tool_choice", "parallel_tool_calls",
		"response_format", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
		"logit_bias", "ignore_eos", "metadata", "store", "reasoning_effort", "service_tier",
		"system", "stop_sequences", "thinking", "input", "instructions", "previous_response_id",
		"max_output_tokens", "text", "reasoning", "include", "truncation", "prompt", "echo",
		"suffix", "best_of", "encoding_format", "dimensions", "min_tokens", "repetition_penalty",
		"skip_special_tokens", "chat_template_kwargs",
	} {
		m[n] = n
	}
	return m
}()

// stringIs reports whether a string of the body, of decoded length n, decodes to want.
func stringIs(quoted []byte, n int, want string) bool {
	if n != len(want) {
		return false
	}
	raw := quoted[1 : len(quoted)-1]
	if len(raw) == n {
		return string(raw) == want
	}
	var buf [32]byte
	return len(want) <= len(buf) && string(appendUnquoted(buf[:0], raw, n)) == want
}

// keyIs reports whether a key is name, as a map decoding matches it: exactly.
func keyIs(key []byte, n int, name string) bool { return stringIs(key, n, name) }

// keyFolds reports whether a key matches the struct field name as encoding/json
// matches one: exactly, else under Unicode case folding (bytes.EqualFold). A rune
// folds to at most three bytes' worth per byte of an ASCII name, which bounds what is
// worth decoding.
func keyFolds(key []byte, n int, name string) bool {
	if n > 3*len(name) {
		return false
	}
	raw := key[1 : len(key)-1]
	if len(raw) == n {
		return bytes.EqualFold(raw, []byte(name))
	}
	var buf [64]byte
	return bytes.EqualFold(appendUnquoted(buf[:0], raw, n), []byte(name))
}
