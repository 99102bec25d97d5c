package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestResetMidStreamIsAnErrorToAnHTTPClient is the use the gateway's tests make of the
// proxy: a streamed HTTP response that the proxy severs must reach the client as a read
// error, never as a clean end of body that could pass for a finished answer.
func TestResetMidStreamIsAnErrorToAnHTTPClient(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // the rest of the answer never comes
	}))
	defer engine.Close()
	p := startProxy(t, engine.Listener.Addr().String())

	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: guard}
	resp, err := client.Get(p.URL() + "/v1/chat/completions")
	if err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := body.ReadString('\n'); err != nil {
		t.Fatalf("blank line after the first event: %v", err)
	}

	p.Reset()
	_, err = body.ReadString('\n')
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read after Reset: %v, want an error other than EOF", err)
	}
	if !isReset(err) {
		t.Fatalf("read after Reset: %v, want ECONNRESET", err)
	}
}
