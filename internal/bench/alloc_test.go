package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The client must not be what a benchmark measures: reading a stream allocates per
// request (the HTTP exchange), never per event. The server here writes pre-built events,
// flushing each, so that the count of allocations is the client's and every event is
// a read of its own (or a few, as the kernel coalesces them).
func TestNoAllocationPerEvent(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	const event = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}` + "\n\n"
	chunk, done := []byte(event), []byte("data: [DONE]\n\n")
	var events int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for range events {
			_, _ = w.Write(chunk)
			f.Flush()
		}
		_, _ = w.Write(done)
	}))
	defer srv.Close()

	opts := &Options{URL: srv.URL, Model: "m", Prompt: "p", MaxTokens: 1, Concurrency: 1, Requests: 1}
	if err := opts.check(); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(1)
	defer tr.CloseIdleConnections()
	r := &runner{opts: opts, endpoint: srv.URL + "/v1/chat/completions", body: opts.Body(), header: opts.header(), client: &http.Client{Transport: tr}}
	w := &worker{r: r, buf: make([]byte, readBufferSize), rec: recorder{errs: map[errorKey]int{}}}
	w.rec.ttft, w.rec.gaps, w.rec.latency = make([]int64, 0, 1<<10), make([]int64, 0, 1<<20), make([]int64, 0, 1<<10)

	allocs := func(n int) float64 {
		events = n
		w.do(context.Background()) // grows the decoder and warms the connection
		return testing.AllocsPerRun(20, func() { w.do(context.Background()) })
	}
	few, many := allocs(4), allocs(400)
	if w.rec.ok != w.rec.requests || len(w.rec.errs) != 0 {
		t.Fatalf("requests failed: %+v", w.rec.errs)
	}
	t.Logf("allocations per request: %.0f with 4 events, %.0f with 400", few, many)
	if many > few+2 {
		t.Fatalf("%.0f allocations per request of 400 events, %.0f of 4: the client allocates per event", many, few)
	}
}
