package sse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// gotEvent is a copy of an Event that outlives the decoder's buffer.
type gotEvent struct {
	raw   string
	data  *string
	name  string
	class Class
}

func (g gotEvent) String() string {
	data := "<nil>"
	if g.data != nil {
		data = fmt.Sprintf("%q", *g.data)
	}
	return fmt.Sprintf("{raw %q data %s name %q class %v}", g.raw, data, g.name, g.class)
}

func copyEvent(e Event) gotEvent {
	g := gotEvent{raw: string(e.Raw), name: string(e.Name), class: e.Class}
	if e.Data != nil {
		s := string(e.Data)
		g.data = &s
	}
	return g
}

// decodeChunks feeds chunks one Append at a time, draining Next after each. Like the
// gateway's reader, it reads every chunk into the same buffer and overwrites it once Next
// reported false: the decoder must not depend on a slice it was given after that.
func decodeChunks(t *testing.T, chunks ...string) ([]gotEvent, *Decoder) {
	t.Helper()
	var d Decoder
	var got []gotEvent
	var read []byte
	for _, c := range chunks {
		read = append(read[:0], c...)
		d.Append(read)
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			got = append(got, copyEvent(e))
		}
		for i := range read {
			read[i] = 'X'
		}
	}
	if err := d.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	return got, &d
}

func TestDecoderStreams(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			got, d := decodeChunks(t, tc.stream)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events, want %d:\n%v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				want := gotEvent{raw: w.raw, data: w.data, name: w.name, class: w.class}
				if g.String() != want.String() {
					t.Errorf("event %d:\n got %v\nwant %v", i, g, want)
				}
			}
			if d.Buffered() != tc.rest {
				t.Errorf("Buffered() = %d, want %d", d.Buffered(), tc.rest)
			}
		})
	}
}

// sameEvents compares events decoded from split input with those decoded
// from the whole input. The one permitted difference: when the split falls
// between the CR and LF of an event's final CRLF, that event is returned at
// the CR and the LF is dropped (see Decoder).
func sameEvents(t *testing.T, stream string, split int, whole, got []gotEvent) {
	t.Helper()
	if len(got) != len(whole) {
		t.Fatalf("split at %d: %d events, want %d\n got %v\nwant %v", split, len(got), len(whole), got, whole)
	}
	offset := 0 // where the current event starts in stream
	for i := range whole {
		w, g := whole[i], got[i]
		offset = strings.Index(stream[offset:], w.raw) + offset
		end := offset + len(w.raw)
		if g.raw != w.raw && strings.HasSuffix(w.raw, "\r\n") && split == end-1 {
			w.raw = w.raw[:len(w.raw)-1]
		}
		if g.String() != w.String() {
			t.Fatalf("split at %d, event %d:\n got %v\nwant %v", split, i, g, w)
		}
		offset = end
	}
}

func TestDecoderSplitAtEveryOffset(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			whole, wd := decodeChunks(t, tc.stream)
			for split := 0; split <= len(tc.stream); split++ {
				got, d := decodeChunks(t, tc.stream[:split], tc.stream[split:])
				sameEvents(t, tc.stream, split, whole, got)
				if d.Buffered() != wd.Buffered() {
					t.Fatalf("split at %d: Buffered() = %d, want %d", split, d.Buffered(), wd.Buffered())
				}
			}
		})
	}
}

func TestDecoderByteAtATime(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			whole, wd := decodeChunks(t, tc.stream)
			chunks := make([]string, len(tc.stream))
			for i := range tc.stream {
				chunks[i] = tc.stream[i : i+1]
			}
			got, d := decodeChunks(t, chunks...)
			if len(got) != len(whole) {
				t.Fatalf("%d events, want %d", len(got), len(whole))
			}
			for i := range whole {
				g, w := got[i], whole[i]
				// Byte-at-a-time puts every CR at the end of a buffer.
				if g.raw != w.raw && strings.HasSuffix(w.raw, "\r\n") {
					w.raw = w.raw[:len(w.raw)-1]
				}
				if g.String() != w.String() {
					t.Fatalf("event %d:\n got %v\nwant %v", i, g, w)
				}
			}
			if d.Buffered() != wd.Buffered() {
				t.Fatalf("Buffered() = %d, want %d", d.Buffered(), wd.Buffered())
			}
		})
	}
}

// TestDecoderRawIsVerbatim checks that the events of an LF stream, laid end
// to end, are exactly the bytes received: nothing is rewritten or lost.
func TestDecoderRawIsVerbatim(t *testing.T) {
	var d Decoder
	var out []byte
	stream := []byte(vllmChatStream + ": keepalive\n\nevent: meta\nid: 7\ndata: {}\n\n")
	for i := 0; i < len(stream); i += 37 {
		d.Append(stream[i:min(i+37, len(stream))])
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			out = append(out, e.Raw...)
		}
	}
	if !bytes.Equal(out, stream) {
		t.Fatalf("forwarded bytes differ:\n got %q\nwant %q", out, stream)
	}
}

func TestDecoderEventsValidUntilAppend(t *testing.T) {
	var d Decoder
	d.Append([]byte("data: a\ndata: b\n\ndata: c\ndata: d\n\ndata: {}\n\n"))
	var events []Event
	for {
		e, ok := d.Next()
		if !ok {
			break
		}
		events = append(events, e)
	}
	want := []string{"a\nb", "c\nd", "{}"}
	if len(events) != len(want) {
		t.Fatalf("got %d events", len(events))
	}
	for i, w := range want {
		if string(events[i].Data) != w {
			t.Errorf("event %d data %q, want %q", i, events[i].Data, w)
		}
	}
}

func TestDecoderTooLarge(t *testing.T) {
	t.Run("incomplete event over the cap", func(t *testing.T) {
		d := Decoder{limit: 64}
		d.Append([]byte("data: [DONE]\n\n"))
		if e, ok := d.Next(); !ok || e.Class != Done {
			t.Fatalf("small event: ok=%v class=%v", ok, e.Class)
		}
		chunk := []byte("data: " + strings.Repeat("x", 20))
		for range 3 {
			d.Append(chunk)
			if _, ok := d.Next(); ok {
				t.Fatal("Next returned an event from an incomplete one")
			}
		}
		if !errors.Is(d.Err(), ErrEventTooLarge) {
			t.Fatalf("Err() = %v, want ErrEventTooLarge", d.Err())
		}
		// Input after the failure is dropped rather than buffered.
		d.Append(bytes.Repeat(chunk, 10))
		if d.Buffered() != 0 {
			t.Fatalf("Buffered() = %d after failure, want 0", d.Buffered())
		}
		if _, ok := d.Next(); ok {
			t.Fatal("Next returned an event after failure")
		}
		d.Reset()
		if d.Err() != nil {
			t.Fatalf("Err() after Reset = %v", d.Err())
		}
		d.Append([]byte("data: [DONE]\n\n"))
		if e, ok := d.Next(); !ok || e.Class != Done {
			t.Fatalf("after Reset: ok=%v class=%v", ok, e.Class)
		}
	})
	t.Run("complete event over the cap", func(t *testing.T) {
		d := Decoder{limit: 64}
		d.Append([]byte("data: " + strings.Repeat("x", 100) + "\n\n"))
		if _, ok := d.Next(); ok {
			t.Fatal("Next returned an oversized event")
		}
		if !errors.Is(d.Err(), ErrEventTooLarge) {
			t.Fatalf("Err() = %v, want ErrEventTooLarge", d.Err())
		}
	})
	t.Run("default cap", func(t *testing.T) {
		var d Decoder
		chunk := bytes.Repeat([]byte("y"), 64<<10)
		d.Append([]byte("data: "))
		for d.Err() == nil && d.Buffered() <= MaxEventSize+len(chunk) {
			d.Append(chunk)
			d.Next()
		}
		if !errors.Is(d.Err(), ErrEventTooLarge) {
			t.Fatalf("Err() = %v after %d bytes, want ErrEventTooLarge", d.Err(), d.Buffered())
		}
		if cap(d.buf) > 2*MaxEventSize {
			t.Fatalf("buffer grew to %d bytes", cap(d.buf))
		}
	})
}

func TestDecoderReset(t *testing.T) {
	var d Decoder
	d.Append([]byte("data: {\"partial"))
	if _, ok := d.Next(); ok {
		t.Fatal("event from partial input")
	}
	d.Reset()
	if d.Buffered() != 0 {
		t.Fatalf("Buffered() = %d after Reset", d.Buffered())
	}
	d.Append([]byte("data: [DONE]\n\n"))
	e, ok := d.Next()
	if !ok || string(e.Raw) != "data: [DONE]\n\n" {
		t.Fatalf("after Reset: ok=%v raw=%q", ok, e.Raw)
	}
}

// TestDecoderCompacts checks that a long stream does not grow the buffer:
// consumed bytes are dropped on Append.
func TestDecoderCompacts(t *testing.T) {
	var d Decoder
	event := []byte("data: " + vllmContent + "\n\n")
	for range 1000 {
		d.Append(event[:50])
		d.Append(event[50:])
		if _, ok := d.Next(); !ok {
			t.Fatal("no event")
		}
	}
	if cap(d.buf) > 4*len(event) {
		t.Fatalf("buffer capacity %d for %d-byte events", cap(d.buf), len(event))
	}
}

func TestAppendData(t *testing.T) {
	got := AppendData([]byte("x"), []byte(`{"a":1}`))
	if string(got) != "x"+`data: {"a":1}`+"\n\n" {
		t.Fatalf("AppendData = %q", got)
	}
	var d Decoder
	d.Append(AppendData(nil, []byte(vllmContent)))
	d.Append(KeepaliveEvent)
	d.Append(DoneEvent)
	var classes []Class
	for {
		e, ok := d.Next()
		if !ok {
			break
		}
		classes = append(classes, e.Class)
	}
	if fmt.Sprint(classes) != fmt.Sprint([]Class{Output, Comment, Done}) {
		t.Fatalf("classes %v", classes)
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{
		0:               "0",
		Output | Finish: "Output|Finish",
		Malformed:       "Malformed",
		Comment | 1<<12: "Comment|unknown",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint16(c), got, want)
		}
	}
	if !Finish.OutputBearing() || !Output.OutputBearing() || (Usage | Comment | Done).OutputBearing() {
		t.Error("OutputBearing wrong")
	}
}

// TestDecoderSummary checks that the decoder fills in the Summary of each
// event's data in the pass that classifies it, spans relative to Data.
func TestDecoderSummary(t *testing.T) {
	stream := ": keepalive\n\n" +
		"data: " + vllmContentUsage + "\n\n" +
		"data: " + vllmTwoFinish + "\n\n" +
		"data: {\"id\":\"x\",\ndata:  \"usage\" : null,\ndata: \"choices\":[{\"index\":2,\"finish_reason\":\"stop\"}]}\n\n" +
		"error: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1}}\n\n" +
		"event: ping\n\n" +
		"data: [DONE]\n\n"
	type want struct {
		class    Class
		outputs  int
		finished uint64
		tokens   int
		cut      string
	}
	wants := []want{
		{Comment, 0, 0, -1, ""},
		{Output | Usage, 1, 0, 4, `,"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`},
		{Finish, 0, 1<<0 | 1<<1, -1, ""},
		{Finish, 0, 1 << 2, -1, ",\n \"usage\" : null"},
		// A failure delivers nothing, whatever its body says.
		{Output | Finish | Usage | Error, 0, 1 << 0, 1, `,"usage":{"completion_tokens":1}`},
		{0, 0, 0, -1, ""},
		{Done, 0, 0, -1, ""},
	}
	var d Decoder
	d.Append([]byte(stream))
	for i, w := range wants {
		e, ok := d.Next()
		if !ok {
			t.Fatalf("event %d missing", i)
		}
		got := want{e.Class, e.Outputs, e.Finished, e.CompletionTokens, string(e.Data[e.UsageStart:e.UsageEnd])}
		if got != w || e.FinishedHigh != 0 {
			t.Errorf("event %d (%q): got %+v (high %d), want %+v", i, e.Data, got, e.FinishedHigh, w)
		}
		if w.cut == "" && (e.UsageStart != 0 || e.UsageEnd != 0) {
			t.Errorf("event %d: usage span %d:%d, want none", i, e.UsageStart, e.UsageEnd)
		}
		if e.Data != nil && e.Class&Error == 0 {
			s := Summarize(e.Data)
			if s.Class != e.Class || s.Outputs != e.Outputs || s.Finished != e.Finished || s.FinishedHigh != e.FinishedHigh ||
				s.CompletionTokens != e.CompletionTokens || s.UsageStart != e.UsageStart || s.UsageEnd != e.UsageEnd {
				t.Errorf("event %d: %+v differs from Summarize(Data) = %+v", i, e, s)
			}
		}
	}
	if e, ok := d.Next(); ok {
		t.Fatalf("unexpected event %q", e.Raw)
	}
}
