package openai

import (
	"fmt"
	"unicode/utf8"
)

// MaxDepth bounds how deeply a request body may nest arrays and objects. Real requests
// (messages, tool schemas) stay far below it; the engines behind the gateway parse bodies
// recursively (Python's json has a recursion limit near 1000), so a deeper body would reach
// them only to fail there, or make them spend a stack on it.
const MaxDepth = 128

// checkBody reports why the scan refused a body (f is its first fault). The gateway
// refuses what a JSON decoder would accept but no engine should get: bytes that are not
// UTF-8 (Go's decoder would replace them silently, Python's refuses them) and nesting
// deeper than MaxDepth; and, after the scan, a key given twice at the top level, where the
// gateway reads model, stream and the token limits: parsers disagree on which of two
// values wins, and the gateway must route and limit by the value the engine will use.
//
// The checks keep a fixed order whatever the scan met first: bytes that are not UTF-8
// anywhere, then nesting anywhere, then the first syntax error. Only a refused body pays
// for looking at all of it again.
func checkBody(body []byte, f fault) *Error {
	if !utf8.Valid(body) || f.kind == faultUTF8 {
		return invalid("", "invalid_json", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	if f.kind == faultDepth || depth(body) > MaxDepth {
		return invalid("", "invalid_json",
			fmt.Sprintf("We could not parse the JSON body of your request: it nests arrays and objects deeper than %d levels.", MaxDepth))
	}
	return invalid("", "invalid_json", fmt.Sprintf("We could not parse the JSON body of your request: %s.", f.message()))
}

// duplicateKey refuses an object that names a member twice.
func duplicateKey(name string) *Error {
	return invalid(name, "invalid_json", fmt.Sprintf("We could not parse the JSON body of your request: the key '%s' appears twice.", name))
}

// depth is the deepest nesting of arrays and objects in a JSON text, outside strings.
func depth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			d++
			deepest = max(deepest, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}
