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
	// html: '<', '>' and '&' are escaped too.
	html bool
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
	st := &Style{namedBF: namedBF, html: escaped != ""}
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
		// Eight bytes at a time while they are all written as they are: most of what
		// the gateway writes (ids, names, paths; some twenty strings a request in the
		// access log) is, and a byte at a time was its largest single function.
		for i+8 <= len(s) && st.plain8(load8(s, i)) {
			i += 8
		}
		// Then a byte at a time up to the one that needs more (within eight bytes, or
		// the string's end).
		for i < len(s) && s[i] < utf8.RuneSelf && st.plain[s[i]] {
			i++
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
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

// load8 reads s[i:i+8] as a little-endian word (the compiler makes it one load).
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// below reports (a nonzero word) whether a byte of x is below n, for x without a byte
// of 0x80 or more and n at most 0x80. It never misses one, and may report one that is
// not (a borrow carries past a byte that is): a false report only sends the word to the
// byte-by-byte loop.
func below(x uint64, n byte) uint64 { return (x - ones*uint64(n)) & ^x & highs }

// has reports (a nonzero word) whether a byte of x is b, with below's reservation.
func has(x uint64, b byte) uint64 { return below(x^(ones*uint64(b)), 1) }

// plain8 reports whether all eight bytes of x are ASCII written as they are.
func (st *Style) plain8(x uint64) bool {
	bad := x&highs | below(x, 0x20) | has(x, '"') | has(x, '\\')
	if st.html {
		bad |= has(x, '<') | has(x, '>') | has(x, '&')
	}
	return bad == 0
}
