package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/tidwall/gjson"
)

// Paths the agent does not fence, and data requests without a lease, reach
// the engine unchanged and leave no attempt behind.
func TestUnfencedPassthrough(t *testing.T) {
	s := startSim(t, sim.Config{Revision: "r42"})
	a := startAgent(t, Config{Engine: s.URL()})
	hc := newHTTPClient(t)
	ctx := testContext(t)

	get := func(base, path string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	status, body := get(a.URL(), "/v1/models")
	if status != http.StatusOK || gjson.GetBytes(body, "data.0.id").String() != "sim-model" ||
		!strings.HasSuffix(gjson.GetBytes(body, "data.0.root").String(), "/snapshots/r42") {
		t.Fatalf("/v1/models through the agent: %d %s", status, body)
	}
	if status, _ := get(a.URL(), "/health"); status != http.StatusOK {
		t.Fatalf("/health: %d", status)
	}
	if status, body := get(a.URL(), "/metrics"); status != http.StatusOK || !strings.Contains(string(body), "vllm:num_requests_running") {
		t.Fatalf("/metrics: %d", status)
	}
	if status, body := get(a.URL(), "/fencegate/v1/nothing"); status != http.StatusNotFound || gjson.GetBytes(body, "error.code").String() != "not_found" {
		t.Fatalf("unknown agent path: %d %s", status, body)
	}

	resp, err := post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 12, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	read := readStream(resp.Body, nil)
	resp.Body.Close()
	if read.err != nil || !read.done || len(read.events) != 12+3 { // role, 12 tokens, finish, [DONE]
		t.Fatalf("unfenced stream: %d events, done %v, err %v", len(read.events), read.done, read.err)
	}
	if len(a.Attempts()) != 0 || len(a.recentlyEnded()) != 0 {
		t.Fatal("an unfenced request was tracked as an attempt")
	}
}
