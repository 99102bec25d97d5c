package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// vLLM's servers are Python: some error messages they send quote a request
// body or an exception as Python prints it. The helpers here render those
// messages so that the sim's are the same text, not a paraphrase.

// pyRepr renders JSON as Python's repr of what json.loads makes of it:
// {'k': 'v', 'n': 1, 'b': True, 'x': None}, keys in the order sent.
// Invalid JSON renders as the empty string.
func pyRepr(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := writePyValue(&b, dec); err != nil {
		return ""
	}
	return b.String()
}

func writePyValue(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closing, open := "}", "{"
		if v == '[' {
			closing, open = "]", "["
		}
		b.WriteString(open)
		for i := 0; dec.More(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				b.WriteString(pyStr(key.(string)))
				b.WriteString(": ")
			}
			if err := writePyValue(b, dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		b.WriteString(closing)
	case string:
		b.WriteString(pyStr(v))
	case json.Number:
		b.WriteString(pyNumber(v))
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case nil:
		b.WriteString("None")
	}
	return nil
}

// pyStr is Python's repr of a str: single quotes unless the text has a
// single quote and no double quote, the short escapes, \xNN for other
// control characters.
func pyStr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyNumber is Python's repr of a JSON number: an int as written, a float
// in repr's shortest form with ".0" or an exponent where Python puts one.
func pyNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	return pyFloat(f)
}

// pyFloat is Python's repr of a float: the shortest digits that round-trip,
// in positional notation for exponents from -4 to 15, else scientific.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyFloatJSON is a float field of a pydantic model, which its JSON writes
// as Python does: 1.0, not 1.
type pyFloatJSON float64

func (f pyFloatJSON) MarshalJSON() ([]byte, error) { return []byte(pyFloat(float64(f))), nil }

// pyTuple is Python's repr of a tuple of strings and ints, as pydantic
// writes an error's loc: ('body', 'messages', 0), ('body',).
func pyTuple(items []any) string {
	parts := make([]string, len(items))
	for i, it := range items {
		switch v := it.(type) {
		case string:
			parts[i] = pyStr(v)
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// validationErrors collects the errors pydantic reports when FastAPI
// validates a request body against its model, in the order pydantic finds
// them (field by field, in the model's order).
type validationErrors struct {
	errs []validationError
}

// validationError is one entry of pydantic's errors(): type, loc, msg,
// input (Python repr) and, for a failed validator, ctx.
type validationError struct {
	typ, msg string
	loc      []any
	input    string
	ctx      string
}

func (v *validationErrors) add(typ string, loc []any, msg, input string) {
	v.errs = append(v.errs, validationError{typ: typ, msg: msg, loc: loc, input: input})
}

// missing is pydantic's "Field required" for a field absent from parent.
func (v *validationErrors) missing(parent []byte, loc ...any) {
	v.add("missing", loc, "Field required", pyRepr(parent))
}

// valueError is a field validator's ValueError.
func (v *validationErrors) valueError(input []byte, message string, loc ...any) {
	v.errs = append(v.errs, validationError{
		typ: "value_error", loc: loc, msg: "Value error, " + message, input: pyRepr(input),
		ctx: "{'error': ValueError(" + pyStr(message) + ")}",
	})
}

// err renders the collected errors as vLLM's validation_exception_handler
// does (vllm/entrypoints/serve/utils/server_utils.py): HTTP 400, type "Bad
// Request", the message "N validation error(s):" and one line per error
// (its dict as Python prints it), param the first error's loc joined with
// dots. It is the app-wide handler, so the body has the OpenAI shape on
// every endpoint, the Anthropic one included.
func (v *validationErrors) err() *apiError {
	if len(v.errs) == 0 {
		return nil
	}
	label := "errors"
	if len(v.errs) == 1 {
		label = "error"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d validation %s:", len(v.errs), label)
	for _, e := range v.errs {
		fmt.Fprintf(&b, "\n  {'type': %s, 'loc': %s, 'msg': %s, 'input': %s", pyStr(e.typ), pyTuple(e.loc), pyStr(e.msg), e.input)
		if e.ctx != "" {
			fmt.Fprintf(&b, ", 'ctx': %s", e.ctx)
		}
		b.WriteString("}")
	}
	return &apiError{
		status:  http.StatusBadRequest,
		typ:     "Bad Request",
		message: b.String(),
		param:   cleanLoc(v.errs[0].loc),
		plain:   true,
	}
}

// cleanLoc is vLLM's clean_loc_for_param: the loc joined with dots, without
// pydantic's union-branch markers ("str", "list[...]", ...).
func cleanLoc(loc []any) string {
	var parts []string
	for _, p := range loc {
		s := fmt.Sprint(p)
		if strings.ContainsAny(s, "[]{}()") {
			continue
		}
		switch strings.ToLower(s) {
		case "function-wrap", "function-after", "function-before", "function-plain", "json-or-python",
			"lax-or-strict", "chain", "default", "nullable", "tagged-union", "union", "call", "arguments",
			"is-instance", "is-subclass", "callable", "str", "int", "float", "bool", "bytes", "bytearray",
			"list", "tuple", "dict", "set", "frozenset", "complex", "none", "nonetype":
			continue
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ".")
}

// decodeBody checks that a request body is a JSON object, as FastAPI does
// before pydantic sees it, and returns its fields.
func decodeBody(body []byte) (map[string]json.RawMessage, *apiError) {
	var v validationErrors
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		v.add("missing", []any{"body"}, "Field required", "None")
		return nil, v.err()
	}
	if !json.Valid(trimmed) {
		// FastAPI's json_invalid: loc ("body", offset), ctx the decoder's
		// complaint. The sim gives the offset Go's decoder stops at.
		var pos int64
		var syn *json.SyntaxError
		if errors.As(json.Unmarshal(trimmed, new(any)), &syn) {
			pos = syn.Offset
		}
		v.errs = append(v.errs, validationError{
			typ: "json_invalid", loc: []any{"body", pos}, msg: "JSON decode error", input: "{}",
			ctx: "{'error': 'Expecting value'}",
		})
		return nil, v.err()
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		v.add("model_attributes_type", []any{"body"}, "Input should be a valid dictionary or object to extract fields from", pyRepr(trimmed))
		return nil, v.err()
	}
	return fields, nil
}

// jsonKind names the JSON type of raw: "string", "number", "bool",
// "null", "array", "object" or "" when raw is absent.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// Field checks in pydantic's words. Each returns false (and records the
// error) when the value present at loc does not have the field's type.

func checkString(v *validationErrors, raw json.RawMessage, loc ...any) bool {
	if jsonKind(raw) == "string" {
		return true
	}
	v.add("string_type", loc, "Input should be a valid string", pyRepr(raw))
	return false
}

func checkBool(v *validationErrors, raw json.RawMessage, loc ...any) bool {
	if jsonKind(raw) == "bool" {
		return true
	}
	v.add("bool_type", loc, "Input should be a valid boolean", pyRepr(raw))
	return false
}

func checkInt(v *validationErrors, raw json.RawMessage, loc ...any) (int, bool) {
	var f float64
	switch jsonKind(raw) {
	case "number":
		if json.Unmarshal(raw, &f) == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int(f), true
		}
		v.add("int_from_float", loc, "Input should be a valid integer, got a number with a fractional part", pyRepr(raw))
	case "string":
		// pydantic's lax mode takes an integer written as a string.
		var s string
		_ = json.Unmarshal(raw, &s)
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			return n, true
		}
		v.add("int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", pyRepr(raw))
	default:
		v.add("int_type", loc, "Input should be a valid integer", pyRepr(raw))
	}
	return 0, false
}

func checkFloat(v *validationErrors, raw json.RawMessage, loc ...any) (float64, bool) {
	var f float64
	if jsonKind(raw) == "number" && json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	v.add("float_type", loc, "Input should be a valid number", pyRepr(raw))
	return 0, false
}

// present reports whether a field was sent with a value other than null,
// which pydantic treats as unset for an optional field.
func present(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k != "" && k != "null"
}

// pyJSONError is the message of the JSONDecodeError Python's json.loads
// raises for s ("Expecting ',' delimiter: line 1 column 8 (char 7)"), or
// "" when s is valid JSON. It knows the cases a cut-off JSON value meets:
// an unterminated string, a missing value, delimiter or property name.
func pyJSONError(s string) string {
	p := &pyScanner{s: s}
	p.ws()
	if !p.value() {
		return p.err
	}
	p.ws()
	if p.i < len(s) {
		p.fail("Extra data", p.i)
		return p.err
	}
	return ""
}

// pyScanner follows the scanner of CPython's json module closely enough to
// fail where it fails and say what it says.
type pyScanner struct {
	s   string
	i   int
	err string
}

func (p *pyScanner) fail(msg string, pos int) bool {
	line, col := 1, pos+1
	if nl := strings.LastIndexByte(p.s[:pos], '\n'); nl >= 0 {
		line = strings.Count(p.s[:pos], "\n") + 1
		col = pos - nl
	}
	p.err = fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, pos)
	return false
}

func (p *pyScanner) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyScanner) value() bool {
	if p.i >= len(p.s) {
		return p.fail("Expecting value", p.i)
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.s) && strings.IndexByte("+-0123456789.eE", p.s[p.i]) >= 0 {
			p.i++
		}
		if _, err := strconv.ParseFloat(p.s[start:p.i], 64); err != nil {
			return p.fail("Expecting value", start)
		}
	default:
		return p.fail("Expecting value", p.i)
	}
	return true
}

func (p *pyScanner) str() bool {
	start := p.i
	p.i++ // the opening quote
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case '"':
			p.i++
			return true
		case '\\':
			p.i += 2
			continue
		}
		p.i++
	}
	return p.fail("Unterminated string starting at", start)
}

func (p *pyScanner) object() bool {
	p.i++ // '{'
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return true
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.fail("Expecting property name enclosed in double quotes", p.i)
		}
		if !p.str() {
			return false
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.fail("Expecting ':' delimiter", p.i)
		}
		p.i++
		p.ws()
		if !p.value() {
			return false
		}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return true
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return p.fail("Expecting ',' delimiter", p.i)
		}
		p.i++
		p.ws()
	}
}

func (p *pyScanner) array() bool {
	p.i++ // '['
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return true
	}
	for {
		if !p.value() {
			return false
		}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return true
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return p.fail("Expecting ',' delimiter", p.i)
		}
		p.i++
		p.ws()
	}
}

// jsonText encodes s as a JSON string the way pydantic and FastAPI do:
// UTF-8 as is, no HTML escaping.
func jsonText(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // strings always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// marshalPlain is json.Marshal without HTML escaping, for bodies whose
// strings vLLM sends unescaped.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
