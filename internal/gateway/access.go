package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/logging"
	"github.com/fencegate/fencegate/internal/request"
)

// accessEntry is what one access-log line says of a request. The handler that serves the
// request fills it in; the middleware writes the line when the handler returns. It never
// holds the prompt or the answer.
type accessEntry struct {
	model, endpoint, tenant string
	outcome, errCode        string
	replica                 string
	attempts                int
	delivered               int
	ttft                    time.Duration // 0: no output was delivered
	queued                  time.Duration // waited in the pool's queue (ttft includes it)
}

// accessOf returns the request's access-log entry (nil outside the middleware, and for
// requests the access log does not write).
func accessOf(r *http.Request) *accessEntry {
	if info := infoOf(r); info != nil && info.logged {
		return &info.access
	}
	return nil
}

// noteEnd fills in the access-log entry of a request served by its owner with how it ended.
func noteEnd(r *http.Request, end request.End) {
	a := accessOf(r)
	if a == nil {
		return
	}
	a.outcome, a.attempts, a.delivered, a.replica, a.ttft = end.Outcome.String(), end.Attempts, end.Delivered, end.Replica, end.TTFT
	a.queued = end.Queued
	if end.ErrCode != "" {
		a.errCode = end.ErrCode
	}
}

// statusWriter remembers the status a handler answered with. Unwrap lets
// http.ResponseController reach the connection (flushes, write deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withAccessLog writes one log line per API or admin request when its handler returns:
// request id, method, path, status, duration, and what the request's owner recorded
// (model, endpoint, outcome, attempts, last replica, time to first token, delivered
// tokens, the error code). Health checks and metric scrapes are not logged: they come every
// few seconds and say nothing about requests. A client that left before any status was
// sent is logged as 499, as nginx does.
func (s *Server) withAccessLog(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasPrefix(r.URL.Path, "/admin/") {
			h(w, r)
			return
		}
		info := infoOf(r)
		if info == nil {
			h(w, r)
			return
		}
		start := time.Now()
		info.logged = true
		entry, sw := &info.access, &info.sw
		sw.ResponseWriter = w
		h(sw, r)
		status := sw.status
		if status == 0 {
			status = 499
		}
		s.logAccess(r, start, status, entry)
	}
}

// logAccess writes a request's access line. It is a function of its own so that the line's
// attributes and record are on the stack only while it is written, not in withAccessLog's
// frame for the whole request: a streaming request's goroutine keeps a smaller stack
// (docs/performance.md).
//
//go:noinline
func (s *Server) logAccess(r *http.Request, start time.Time, status int, entry *accessEntry) {
	handler := s.log.Handler()
	if !handler.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	end := time.Now()
	var buf [12]slog.Attr
	attrs := append(buf[:0],
		slog.String("request_id", requestID(r)), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), millis("duration_ms", end.Sub(start)),
	)
	if entry.model != "" {
		attrs = append(attrs, slog.String("model", entry.model), slog.String("endpoint", entry.endpoint),
			slog.String("outcome", entry.outcome), slog.Int("attempts", entry.attempts), slog.String("replica", entry.replica),
			slog.Int("delivered_output_tokens", entry.delivered))
		if entry.ttft > 0 {
			attrs = append(attrs, millis("ttft_ms", entry.ttft))
		}
		if entry.queued > 0 {
			attrs = append(attrs, millis("queued_ms", entry.queued))
		}
	}
	if entry.tenant != "" {
		attrs = append(attrs, slog.String("key_id", entry.tenant))
	}
	if entry.errCode != "" {
		attrs = append(attrs, slog.String("error_code", entry.errCode))
	}
	// Written by hand when the log is the JSON lines it is by default: slog's handler
	// took three times as long for the same bytes (logging.WriteJSONLine). Otherwise
	// straight to the handler, with no caller's PC: Logger.LogAttrs walks the stack for
	// one on every call, a twentieth of a streamed request's own instructions, for a
	// source location the access log never prints.
	if logging.WriteJSONLine(handler, end, slog.LevelInfo, "request", attrs) {
		return
	}
	rec := slog.NewRecord(end, slog.LevelInfo, "request", 0)
	rec.AddAttrs(attrs...)
	handler.Handle(r.Context(), rec)
}

// millis is a duration in milliseconds, to the microsecond, as a JSON number. slog's JSON
// handler writes a float64 with encoding/json, whose float formatting took the deepest frames
// of a request's goroutine (docs/performance.md); a json.Number it writes as it is, and the
// text handler prints the same digits.
func millis(key string, d time.Duration) slog.Attr {
	var buf [24]byte
	return slog.Any(key, json.Number(appendMillis(buf[:0], d.Microseconds())))
}

// appendMillis appends us microseconds as milliseconds, the digits
// strconv.FormatFloat(float64(us)/1000, 'f', -1, 64) gives, without its float formatting
// (two of them were a tenth of the access log's line): below 10^15 microseconds — 31 years
// — the shortest decimal that reads back as the float nearest us/1000 is us/1000 itself,
// written without trailing zeros (TestAppendMillisMatchesFormatFloat).
func appendMillis(dst []byte, us int64) []byte {
	if us < 0 {
		if us <= -1e15 {
			return strconv.AppendFloat(dst, float64(us)/1000, 'f', -1, 64)
		}
		dst = append(dst, '-')
		us = -us
	}
	if us >= 1e15 {
		return strconv.AppendFloat(dst, float64(us)/1000, 'f', -1, 64)
	}
	dst = strconv.AppendInt(dst, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return dst
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}
