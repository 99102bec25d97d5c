package sim

import (
	"strconv"
	"unicode/utf8"
)

// vLLM renders a mid-stream error event with Python's json.dumps and its
// defaults, not with the compact encoder FastAPI uses for whole bodies: a
// space after every ':' and ',' and every non-ASCII character escaped. A
// client that matches bytes (`"code":500`) must meet that shape here too.

// streamErrorJSON is the body of vLLM's mid-stream error event for e:
// json.dumps(ErrorResponse(error=ErrorInfo(...)).model_dump()).
func streamErrorJSON(e apiError) []byte {
	b := []byte(`{"error": {"message": `)
	b = appendPyString(b, e.message)
	b = append(b, `, "type": `...)
	b = appendPyString(b, e.errType())
	b = append(b, `, "param": `...)
	if e.param == "" {
		b = append(b, "null"...)
	} else {
		b = appendPyString(b, e.param)
	}
	b = append(b, `, "code": `...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	return append(b, "}}"...)
}

// appendPyString appends s as Python's json.dumps writes a string with
// ensure_ascii: the short escapes for '"', '\\' and \b \f \n \r \t, \u00XX
// for other control characters, and \uXXXX (a surrogate pair beyond the
// BMP) for everything above ASCII. Invalid UTF-8 becomes U+FFFD.
func appendPyString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u4 := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20:
			b = u4(b, r)
		case r < utf8.RuneSelf:
			b = append(b, byte(r))
		case r > 0xffff:
			r -= 0x10000
			b = u4(b, 0xd800+(r>>10))
			b = u4(b, 0xdc00+(r&0x3ff))
		default:
			b = u4(b, r)
		}
	}
	return append(b, '"')
}
