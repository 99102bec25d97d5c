package logging

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// WriteJSONLine writes a record of the given time, level, message and attributes as the
// logger NewBuffered made for the JSON format would, byte for byte, without slog's
// generic handler, and reports whether it did. It is for the access log, one line a
// request: slog's JSON handler took a twentieth of a streamed request's instructions to
// format that line, three times what this takes (docs/performance.md, "The floor under
// the gateway"). It does only what it can do exactly — attributes that are strings,
// integers (slog.Int, slog.Int64) or json.Numbers with non-empty keys, on that logger's
// handler itself, not one made by With or WithGroup — and otherwise writes nothing and
// returns false; the caller then hands the record to the handler. The caller checks
// Enabled first, as slog.Logger does.
func WriteJSONLine(h slog.Handler, t time.Time, level slog.Level, msg string, attrs []slog.Attr) bool {
	fh, ok := h.(flushingHandler)
	if !ok || !fh.bareJSON {
		return false
	}
	if y := t.Year(); y < 0 || y >= 10000 {
		return false // slog writes an error in place of such a time
	}
	bp := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(bp)
	b := append((*bp)[:0], `{"time":"`...)
	b = t.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendJSONString(b, level.String())
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, msg)
	for _, a := range attrs {
		if a.Key == "" {
			return false
		}
		b = append(b, ',')
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = appendJSONString(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindAny:
			n, ok := v.Any().(json.Number)
			switch {
			case !ok:
				return false
			case n == "":
				b = append(b, '0') // encoding/json's encoding of an empty Number
			case validJSONNumber(string(n)):
				b = append(b, n...)
			default:
				return false // slog writes the encoding error instead
			}
		default:
			return false
		}
	}
	b = append(b, "}\n"...)
	*bp = b
	_, _ = fh.b.Write(b) // the JSON handler's error is the writer's, which slog.Logger drops too
	if level >= slog.LevelWarn {
		_ = fh.b.Flush()
	}
	return true
}

var lineBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// appendJSONString appends s quoted as log/slog's JSON handler quotes it: encoding/json's
// escapes without the HTML ones, invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// plainASCII marks the ASCII bytes a JSON string holds as they are: all but the controls,
// the quote and the backslash. A table, since this loop is most of the line's cost.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validJSONNumber reports whether s is a JSON number, as encoding/json checks a
// json.Number before writing it.
func validJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
