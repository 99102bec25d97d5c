package sse

import "testing"

// The hot path must not allocate per event: these tests fail if a change
// makes Classify, Count or the decoder allocate in the steady state.

func TestClassifyDoesNotAllocate(t *testing.T) {
	inputs := [][]byte{
		[]byte(vllmContent), []byte(vllmToolArgs), []byte(sglangFinish),
		[]byte(llamaFinish), []byte(vllmError), []byte(`{"object":"\u0065rror"}`),
		[]byte(vllmContent[:50]),
	}
	allocs := testing.AllocsPerRun(200, func() {
		for _, in := range inputs {
			Classify(in)
			Count(in)
		}
	})
	if allocs != 0 {
		t.Fatalf("Classify and Count allocate %.1f times per run, want 0", allocs)
	}
}

// TestSummarizeDoesNotAllocate covers the per-chunk work of a multi-choice
// stream and of one whose usage is counted and stripped: every field of the
// Summary is checked, so none can be computed by a path that allocates.
func TestSummarizeDoesNotAllocate(t *testing.T) {
	cases := []struct {
		data     string
		class    Class
		outputs  int
		finished uint64
		high     int
		tokens   int
		cut      string
	}{
		{vllmContentUsage, Output | Usage, 1, 0, 0, 4, `,"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`},
		{sglangContent, Output, 1, 0, 0, -1, `,"usage":null`},
		{vllmTwoFinish, Finish, 0, 1<<0 | 1<<1, 0, -1, ""},
		{vllmCompl, Output, 1, 0, 0, -1, `,"usage":null`},
		{vllmComplEnd, Finish, 0, 1 << 0, 0, -1, `,"usage":null`},
		{`{"choices":[{"index":70,"finish_reason":"stop"}],"us\u0061ge":{"completion_tokens":4.0}}`, Finish | Usage, 0, 0, 1, 4,
			`,"us\u0061ge":{"completion_tokens":4.0}`},
		{vllmContentUsage[:60], Malformed, 0, 0, 0, -1, ""},
	}
	inputs := make([][]byte, len(cases))
	for i, tc := range cases {
		inputs[i] = []byte(tc.data)
	}
	sums := make([]Summary, len(cases))
	dst := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(200, func() {
		for i, in := range inputs {
			sums[i] = Summarize(in)
			dst = StripUsage(dst[:0], in)
		}
	})
	if allocs != 0 {
		t.Fatalf("Summarize and StripUsage allocate %.1f times per run, want 0", allocs)
	}
	for i, tc := range cases {
		s := sums[i]
		if s.Class != tc.class || s.Outputs != tc.outputs || s.Finished != tc.finished || s.FinishedHigh != tc.high ||
			s.CompletionTokens != tc.tokens || tc.data[s.UsageStart:s.UsageEnd] != tc.cut {
			t.Errorf("Summarize(%s) = %+v", tc.data, s)
		}
	}
}

func TestDecoderDoesNotAllocateInSteadyState(t *testing.T) {
	stream := []byte(vllmChatStream + ": keepalive\n\ndata: a\ndata: b\n\n")
	var d Decoder
	run := func() {
		// Reads rarely line up with events: feed uneven pieces.
		for i := 0; i < len(stream); i += 97 {
			d.Append(stream[i:min(i+97, len(stream))])
			for {
				if _, ok := d.Next(); !ok {
					break
				}
			}
		}
	}
	run() // let the buffers grow to the stream's working size
	allocs := testing.AllocsPerRun(200, run)
	if allocs != 0 {
		t.Fatalf("Append+Next allocate %.1f times per stream, want 0", allocs)
	}
}
