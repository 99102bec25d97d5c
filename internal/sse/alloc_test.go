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
