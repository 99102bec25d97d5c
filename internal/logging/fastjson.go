package logging

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/jsonstr"
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
	b := append((*bp)[:0], '{')
	if !t.IsZero() { // slog leaves a zero time out
		b = append(b, `"time":"`...)
		b = t.Round(0).AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = jsonstr.Slog.Append(b, level.String())
	b = append(b, `,"msg":`...)
	b = jsonstr.Slog.Append(b, msg)
	for _, a := range attrs {
		if a.Key == "" {
			return false
		}
		b = append(b, ',')
		b = jsonstr.Slog.Append(b, a.Key)
		b = append(b, ':')
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = jsonstr.Slog.Append(b, v.String())
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
	_ = fh.flushAt(level)
	return true
}

var lineBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

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
