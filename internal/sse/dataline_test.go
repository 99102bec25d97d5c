package sse

import (
	"fmt"
	"strings"
	"testing"
)

// fullEvent is everything an Event says, comparable. An event that ends with CR LF at the
// end of a read ends at the CR (the decoder drops the LF when it comes, see Decoder), so
// that LF is left out of Raw here.
func fullEvent(e Event) string {
	raw := e.Raw
	if n := len(raw); n >= 2 && raw[n-2] == '\r' && raw[n-1] == '\n' {
		raw = raw[:n-1]
	}
	return fmt.Sprintf("raw=%q name=%q data=%q nil=%v class=%v outputs=%d fin=%d/%d tokens=%d usage=%d-%d choice=%d seq=%d",
		raw, e.Name, e.Data, e.Data == nil, e.Class, e.Outputs, e.Finished, e.FinishedHigh,
		e.CompletionTokens, e.UsageStart, e.UsageEnd, e.Choice, e.Sequence)
}

// The single-data-line fast path (nextDataLine) must give exactly what the general line
// scan gives. Fed one byte at a time, the decoder never finds a whole event at the start
// of what it holds, so every event goes through the general scan; fed whole, the usual
// ones take the fast path.
func FuzzDecoderDataLine(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.stream))
	}
	for _, s := range []string{
		"data: {}\n\n", "data:{}\n\n", "data:\n\n", "data: \n\n", "data: x\r\n\r\n",
		"data: a\rdata: b\n\n", "data: a\n\ndata: b\r\n\n", "data: [DONE]\n\n\n",
		"data: {\"id\":\"1\",\"choices\":[]}\n\ndata: {\"id\":\"1\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
		"data: a\ndata: b\n\n", "event: x\ndata: y\n\n", ": keepalive\n\ndata: z\n\n", "\n\ndata: q\n\n",
	} {
		f.Add([]byte(s))
	}
	// A CR between a chunk's tokens is valid JSON but ends the line: the scan that proves a
	// line holds none must see it wherever it is, the memo's remembered bytes included.
	for _, chunk := range []string{vllmContentUsage, vllmContent, sglangContent, llamaContent} {
		for _, at := range []string{`,"choices"`, `"choices"`, `"delta"`, `"content"`, `,"logprobs"`, `,"usage"`, `"completion_tokens"`, `}]`, `}`} {
			i := strings.LastIndex(chunk, at)
			if i < 0 {
				continue
			}
			for _, ws := range []string{"\r", " \r", "\r\n"} {
				cr := chunk[:i] + ws + chunk[i:]
				f.Add([]byte("data: " + chunk + "\n\ndata: " + cr + "\n\ndata: " + chunk + "\n\n"))
				f.Add([]byte("data: " + cr + "\n\ndata: " + chunk + "\n\ndata: " + cr + "\n\n"))
				f.Add([]byte("data: " + chunk + "\n\ndata: " + cr + "\n\ndata: " + cr + "\n\n"))
			}
		}
		f.Add([]byte("data: " + chunk + "\r\n\ndata: " + chunk + "\n\n"))
		f.Add([]byte("data: " + chunk + "\n\ndata: " + chunk + " \r\n\n"))
		f.Add([]byte("data: null\r\n\ndata: " + chunk + "\n\n"))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, p := range []Protocol{Completions, Messages, Responses} {
			whole := decodeAll(p, stream, len(stream))
			bytewise := decodeAll(p, stream, 1)
			if len(whole) != len(bytewise) {
				t.Fatalf("%v: %d events whole, %d byte by byte", p, len(whole), len(bytewise))
			}
			for i := range whole {
				if whole[i] != bytewise[i] {
					t.Fatalf("%v event %d:\nwhole     %s\nbytewise  %s", p, i, whole[i], bytewise[i])
				}
			}
		}
		// A decoder that only frames events cuts them where one that reads them does.
		read, framed := framesOf(Decoder{}, stream), framesOf(Decoder{FramesOnly: true}, stream)
		if len(read) != len(framed) {
			t.Fatalf("%d events framed only, %d read", len(framed), len(read))
		}
		for i := range read {
			if read[i] != framed[i] {
				t.Fatalf("event %d framed only %s, read %s", i, framed[i], read[i])
			}
		}
	})
}

// framesOf decodes stream in reads of 7 bytes and returns each event's Raw, Name and Data.
func framesOf(d Decoder, stream []byte) []string {
	var got []string
	for i := 0; i < len(stream); i += 7 {
		d.Append(stream[i:min(i+7, len(stream))])
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			if d.FramesOnly && e.Class&^Comment != 0 {
				got = append(got, fmt.Sprintf("class %v set", e.Class))
				continue
			}
			got = append(got, fmt.Sprintf("raw=%q name=%q data=%q nil=%v", e.Raw, e.Name, e.Data, e.Data == nil))
		}
	}
	if d.FramesOnly {
		d.Reset()
		if !d.FramesOnly {
			got = append(got, "Reset forgot FramesOnly")
		}
	}
	return got
}

func decodeAll(p Protocol, stream []byte, step int) []string {
	d := Decoder{Protocol: p}
	var got []string
	for i := 0; i < len(stream); i += step {
		d.Append(stream[i:min(i+step, len(stream))])
		for {
			e, ok := d.Next()
			if !ok {
				break
			}
			got = append(got, fullEvent(e))
		}
	}
	return got
}
