// Package jsonstr appends Go strings as JSON strings, byte for byte as the standard
// library's two JSON writers do: encoding/json's (HTML-safe) and log/slog's JSON handler's.
// The gateway writes JSON by hand on its hot paths (error bodies, the access log) and must
// not differ from what those writers, and the clients' expectations built on them, produce.
package jsonstr

import "unicode/utf8"

// Style is one writer's escaping rules.
type Style struct {
	// plain marks the ASCII bytes written as they are.
	plain [utf8.RuneSelf]bool
	// namedBF writes \b and \f by name rather than as \u0008 and \u000c.
	namedBF bool
}

// JSON is encoding/json.Marshal's: quote, backslash and control characters escaped (\n,
// \r, \t, \b, \f by name, the rest as \u00XX), '<', '>' and '&' as \u003c, \u003e and
// \u0026 so the JSON is safe inside HTML, U+2028 and U+2029 escaped for JavaScript, and
// invalid UTF-8 replaced by \ufffd.
var JSON = newStyle("<>&", true)

// Slog is log/slog's JSON handler's: encoding/json's escapes without the HTML ones, and
// \b and \f as \u0008 and \u000c.
var Slog = newStyle("", false)

func newStyle(escaped string, namedBF bool) *Style {
	st := &Style{namedBF: namedBF}
	for c := 0x20; c < utf8.RuneSelf; c++ {
		st.plain[c] = c != '"' && c != '\\'
	}
	for i := 0; i < len(escaped); i++ {
		st.plain[escaped[i]] = false
	}
	return st
}

const hexDigits = "0123456789abcdef"

// Append appends s to dst as a JSON string in st's style.
func (st *Style) Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending and needs no escaping
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if st.plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b' && st.namedBF:
				dst = append(dst, '\\', 'b')
			case c == '\f' && st.namedBF:
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
