package sim

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkStreamThroughput measures how many streamed tokens per second
// one replica delivers over loopback with no decode delay: each iteration
// is one chat stream of 256 tokens read to its end on a kept-alive
// connection.
//
//	go test -run '^$' -bench StreamThroughput -benchtime=200x ./internal/sim/
func BenchmarkStreamThroughput(b *testing.B) {
	const tokens = 256
	s := startSim(b, Config{})
	tr := &http.Transport{}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	body := jsonBody(b, chatRequest("benchmark", map[string]any{"stream": true, "max_tokens": tokens, "ignore_eos": true}))
	url := s.URL() + "/v1/chat/completions"
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		events := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte("data: ")) {
				events++
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err := sc.Err(); err != nil || events != tokens+3 {
			b.Fatalf("%d events, err %v", events, err)
		}
	}
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
