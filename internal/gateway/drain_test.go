package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// A gateway that stops ends the streams still running with one final error event — never a
// cut connection — and refuses new requests with 503.
func TestDrainEndsRunningStreamsHonestly(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond }})
	resp := post(t, e.srv.URL+"/v1/chat/completions", streamBody("a long answer", 500))
	id := resp.Header.Get("X-Request-Id")
	readUntilContent(t, resp)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	drained := make(chan struct{})
	go func() { e.gw.Drain(ctx); close(drained) }()
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream was cut: %v", err)
	}
	<-drained
	tail := string(rest)
	if !strings.Contains(tail, `"code":"gateway_shutdown"`) || !strings.Contains(tail, `"partial_output":true`) || strings.Contains(tail, "[DONE]") {
		t.Fatalf("end of the stream: %q", tail[max(0, len(tail)-400):])
	}
	if rec := e.record(id); rec.Outcome != "interrupted" {
		t.Fatalf("journal %+v", rec)
	}
	again := post(t, e.srv.URL+"/v1/chat/completions", streamBody("too late", 3))
	if again.StatusCode != http.StatusServiceUnavailable || again.Header.Get("Retry-After") == "" {
		t.Fatalf("a request during shutdown: %d", again.StatusCode)
	}
	if r, _ := http.Get(e.admin.URL + "/readyz"); r == nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatal("readyz must fail while draining")
	}
}
