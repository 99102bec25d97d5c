package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// viaSlog is the line slog's own JSON handler, behind NewBuffered, writes for a record.
func viaSlog(t *testing.T, at time.Time, level slog.Level, msg string, attrs []slog.Attr) string {
	t.Helper()
	var out bytes.Buffer
	l, flush, err := NewBuffered(JSON, &out)
	if err != nil {
		t.Fatal(err)
	}
	rec := slog.NewRecord(at, level, msg, 0)
	rec.AddAttrs(attrs...)
	if err := l.Handler().Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	flush()
	return out.String()
}

// viaFast is the line WriteJSONLine writes, and whether it wrote one.
func viaFast(t *testing.T, at time.Time, level slog.Level, msg string, attrs []slog.Attr) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	l, flush, err := NewBuffered(JSON, &out)
	if err != nil {
		t.Fatal(err)
	}
	ok := WriteJSONLine(l.Handler(), at, level, msg, attrs)
	flush()
	return out.String(), ok
}

// For any record of the kinds it takes, WriteJSONLine writes exactly the line slog's JSON
// handler writes; it declines exactly the records it cannot write so, and writes nothing
// then.
func FuzzWriteJSONLineMatchesSlog(f *testing.F) {
	f.Add("request", "request_id", "0b8f1c7e-1a2b", int64(200), "12.345", int64(1796667724), int64(123456789), 0)
	f.Add("", "path", "/v1/chat/completions?x=<a&b>", int64(-1), "", int64(0), int64(0), 4)
	f.Add("quote\" back\\ nl\n cr\r tab\t bell\x07 del\x7f", "k\"ey", "invalid \xff\xfe utf8 \u2028 \u2029 é 日本", int64(1<<62), "-0.5e+10", int64(-62135596800), int64(1), 8)
	f.Add("m", "", "empty key", int64(0), "1", int64(1), int64(0), 0)
	f.Add("m", "n", "bad number", int64(0), "01", int64(1), int64(0), 0)
	f.Add("m", "n", "bad number", int64(0), "1.", int64(1), int64(0), 0)
	f.Add("m", "n", "far future", int64(0), "1", int64(253402300800), int64(0), 0)
	f.Add("0", "0", "zero time", int64(0), "", int64(-62135596800), int64(0), 0)
	f.Fuzz(func(t *testing.T, msg, key, val string, n int64, num string, sec, nsec int64, level int) {
		at := time.Unix(sec, nsec).UTC()
		if sec%2 == 1 {
			at = at.In(time.FixedZone("", -7*3600-30*60))
		}
		attrs := []slog.Attr{
			slog.String(key, val), slog.Int("status", int(n)), slog.Int64("n64", n),
			slog.Any("duration_ms", json.Number(num)), slog.String("msg2", msg+val),
		}
		lvl := slog.Level(level % 16)
		got, ok := viaFast(t, at, lvl, msg, attrs)
		_, numErr := json.Marshal(json.Number(num))
		year := at.Year()
		want := key != "" && numErr == nil && year >= 0 && year < 10000
		if ok != want {
			t.Fatalf("wrote a line: %v, want %v (key %q, number %q: %v, year %d)", ok, want, key, num, numErr, year)
		}
		if !ok {
			if got != "" {
				t.Fatalf("declined, but wrote %q", got)
			}
			return
		}
		if exp := viaSlog(t, at, lvl, msg, attrs); got != exp {
			t.Fatalf("line:\n%s\nslog's:\n%s", got, exp)
		}
	})
}

// Attributes of other kinds, a logger with attributes or groups added, and the text format
// are left to slog.
func TestWriteJSONLineDeclines(t *testing.T) {
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	for name, attrs := range map[string][]slog.Attr{
		"bool":     {slog.Bool("b", true)},
		"float":    {slog.Float64("f", 1.5)},
		"duration": {slog.Duration("d", time.Second)},
		"group":    {slog.Group("g", slog.String("a", "b"))},
		"any":      {slog.Any("e", map[string]int{"a": 1})},
	} {
		if line, ok := viaFast(t, at, slog.LevelInfo, "m", attrs); ok || line != "" {
			t.Errorf("%s: wrote %q", name, line)
		}
	}
	var out bytes.Buffer
	l, flush, _ := NewBuffered(JSON, &out)
	for name, h := range map[string]slog.Handler{
		"With":      l.With("gateway", "g1").Handler(),
		"WithGroup": l.WithGroup("g").Handler(),
	} {
		if WriteJSONLine(h, at, slog.LevelInfo, "m", nil) {
			t.Errorf("%s: a line was written past the handler's own attributes", name)
		}
	}
	tl, tflush, _ := NewBuffered(Text, &out)
	if WriteJSONLine(tl.Handler(), at, slog.LevelInfo, "m", nil) {
		t.Error("a JSON line was written to a text log")
	}
	flush()
	tflush()
	if out.Len() != 0 {
		t.Errorf("declined, yet written: %q", out.String())
	}
}

// A line at WARN or above is written at once, as the handler writes it; one below waits
// in the buffer.
func TestWriteJSONLineFlushesWarnings(t *testing.T) {
	var w writes
	l, flush, _ := NewBuffered(JSON, &w)
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	WriteJSONLine(l.Handler(), at, slog.LevelInfo, "info", nil)
	if got := w.get(); len(got) != 0 {
		t.Fatalf("an INFO line written at once: %q", got)
	}
	WriteJSONLine(l.Handler(), at, slog.LevelWarn, "warn", nil)
	want := `{"time":"2026-12-07T18:00:00Z","level":"INFO","msg":"info"}` + "\n" +
		`{"time":"2026-12-07T18:00:00Z","level":"WARN","msg":"warn"}` + "\n"
	if got := w.get(); len(got) != 1 || got[0] != want {
		t.Fatalf("after a WARN line: %q, want one write of %q", got, want)
	}
	flush()
}

func BenchmarkAccessLine(b *testing.B) {
	attrs := []slog.Attr{
		slog.String("request_id", "01JEXAMPLE7Q3M6Y2K8ZV4R1T0W"), slog.String("method", "POST"),
		slog.String("path", "/v1/chat/completions"), slog.Int("status", 200), slog.Any("duration_ms", json.Number("3.217")),
		slog.String("model", "sim-model"), slog.String("endpoint", "chat"), slog.String("outcome", "complete"),
		slog.Int("attempts", 1), slog.String("replica", "engine-1"), slog.Int("delivered_output_tokens", 16),
		slog.Any("ttft_ms", json.Number("0.412")),
	}
	l, _, _ := NewBuffered(JSON, discard{})
	h := l.Handler()
	at := time.Now()
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := slog.NewRecord(at, slog.LevelInfo, "request", 0)
			rec.AddAttrs(attrs...)
			h.Handle(context.Background(), rec)
		}
	})
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			WriteJSONLine(h, at, slog.LevelInfo, "request", attrs)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
