package agent

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/fencegate/fencegate/internal/upstream"
)

// The engine's response header reaches the gateway as the engine wrote it, less what
// belongs to the engine's connection (RFC 9110 §7.6.1: the fixed hop-by-hop fields and
// those Connection names) and its framing: names in any case, repeated fields kept in
// order, a name already set on the response replaced.
func TestCopyEngineHeaders(t *testing.T) {
	src := upstream.Header{
		{Name: "content-type", Value: "text/event-stream; charset=utf-8"},
		{Name: "set-cookie", Value: "a=1"},
		{Name: "Content-Length", Value: "42"},
		{Name: "connection", Value: "keep-alive, x-engine-hop"},
		{Name: "X-Engine-Hop", Value: "dropped"},
		{Name: "Keep-Alive", Value: "timeout=5"},
		{Name: "transfer-encoding", Value: "chunked"},
		{Name: "Set-Cookie", Value: "b=2"},
		{Name: "x-request-id", Value: "req_1"},
	}
	dst := http.Header{"X-Request-Id": {"stale"}, "Date": {"kept"}}
	copyEngineHeaders(dst, src)
	want := http.Header{
		"Content-Type": {"text/event-stream; charset=utf-8"},
		"Set-Cookie":   {"a=1", "b=2"},
		"X-Request-Id": {"req_1"},
		"Date":         {"kept"},
	}
	if !reflect.DeepEqual(dst, want) {
		t.Fatalf("copied %v, want %v", dst, want)
	}
}

// The forms engines send are known without parsing; anything else is parsed as before.
func TestIsEventStreamType(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                     true,
		"text/event-stream; charset=utf-8":      true,
		"Text/Event-Stream":                     true,
		"text/event-stream;charset=UTF-8":       true,
		"text/event-stream; charset":            false, // a parameter without a value
		"application/json":                      false,
		"text/event-streams":                    false,
		"":                                      false,
		"application/x-ndjson; charset=utf-8":   false,
		"text/event-stream ; charset=\"utf-8\"": true,
	} {
		if got := isEventStreamType(ct); got != want {
			t.Errorf("isEventStreamType(%q) = %v, want %v", ct, got, want)
		}
	}
}
