package jsonstr

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// JSON writes what encoding/json.Marshal writes for any string, and Slog what log/slog's
// JSON handler writes for it as an attribute's value.
func FuzzStylesMatchTheStandardLibrary(f *testing.F) {
	for _, s := range []string{"", "plain", `quote" back\ `, "nl\n cr\r tab\t bs\b ff\f bell\x07 del\x7f",
		"<a href='x'>&amp;</a>", "invalid \xff\xfe\xc3", "\u2028\u2029 é 日本 🙂", "\x00\x1f"} {
		f.Add(s)
	}
	// Each byte that needs escaping (or starts a rune of more than one byte) at each place
	// of the words Append reads eight bytes at a time, and in the tail after them.
	for _, special := range []string{`"`, `\`, "<", ">", "&", "\x00", "\x1f", "\x7f", "\xff", "é", "\u2028"} {
		for at := range 17 {
			f.Add(strings.Repeat("a", at) + special + strings.Repeat("b", 16-at))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := JSON.Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("JSON %q: %s, encoding/json %s", s, got, want)
		}
		var line bytes.Buffer
		slog.New(slog.NewJSONHandler(&line, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		}})).Info("", "k", s)
		wantSlog := strings.TrimSuffix(strings.TrimPrefix(line.String(), `{"k":`), "}\n")
		if got := Slog.Append(nil, s); string(got) != wantSlog {
			t.Fatalf("Slog %q: %s, slog %s", s, got, wantSlog)
		}
	})
}

// What the access log writes most: ids, names, paths, a few words.
func BenchmarkAppend(b *testing.B) {
	strs := []string{"req_01KBQ2T3VZ8W4XY5N6M7P8R9S0", "POST", "/v1/chat/completions", "sim-model", "engine-1",
		"completed", "127.0.0.1:54321", "request completed"}
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = buf[:0]
		for _, s := range strs {
			buf = Slog.Append(buf, s)
		}
	}
}
