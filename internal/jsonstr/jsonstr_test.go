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
