package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/tidwall/gjson"
	"go.uber.org/goleak"
)

// rawAnswer sends raw bytes on a new connection and reads one response.
func rawAnswer(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// wantAPIError checks an error answer: the status, the API's own error shape, the code, a
// request id.
func wantAPIError(t *testing.T, what, path string, status int, h http.Header, body string, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || errorCode(body) != wantCode {
		t.Errorf("%s on %s: %d %s, want %d %s", what, path, status, body, wantStatus, wantCode)
		return
	}
	if !gjson.Valid(body) || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || h.Get("X-Request-Id") == "" ||
		gjson.Get(body, "error.request_id").String() != h.Get("X-Request-Id") || gjson.Get(body, "error.message").String() == "" {
		t.Errorf("%s on %s: not a complete API error: %v %s", what, path, h, body)
	}
	if anthropic := gjson.Get(body, "type").String() == "error"; anthropic != (path == "/v1/messages") {
		t.Errorf("%s on %s: error shape of the wrong API: %s", what, path, body)
	}
}

// Hostile requests on each API: every one is answered with a clear 4xx in that API's error
// shape, nothing panics, nothing reaches a replica, and no goroutine is left behind.
func TestHostileRequests(t *testing.T) {
	// The server's hangup watcher lives as long as the process, started by the first server.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/fencegate/fencegate/internal/h1server.(*hangupWatcher).run"))
	func() {
		s, err := sim.Start(sim.Config{Name: "sim-1", Model: "sim-model"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// A limit below the default, so that bodies over it stay small.
		g := startTenantGWNoCleanup(t, []*sim.Server{s}, func(c *config.Config) { c.Limits.MaxBodyBytes = 4 << 20 })
		defer g.close()
		addr := strings.TrimPrefix(g.url, "http://")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}

		type body func(path string) string
		valid := map[string]string{
			"/v1/chat/completions": `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":%s}]}`,
			"/v1/messages":         `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":%s}]}`,
			"/v1/responses":        `{"model":"sim-model","max_output_tokens":2,"input":%s}`,
		}
		tokensField := map[string]string{"/v1/chat/completions": "max_tokens", "/v1/messages": "max_tokens", "/v1/responses": "max_output_tokens"}
		with := func(content string) body {
			return func(p string) string { return fmt.Sprintf(valid[p], content) }
		}
		maxTokens := func(v string) body {
			return func(p string) string {
				return strings.Replace(fmt.Sprintf(valid[p], `"x"`), `"`+tokensField[p]+`":2`, `"`+tokensField[p]+`":`+v, 1)
			}
		}
		cases := []struct {
			name   string
			body   body
			ctype  string
			status int
			code   string
		}{
			{"deeply nested JSON", with(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)), "", 400, "invalid_json"},
			{"invalid UTF-8", with("\"\xff\xfe\""), "", 400, "invalid_json"},
			{"a 10 MB string field", with(`"` + strings.Repeat("a", 10<<20) + `"`), "", 413, "request_too_large"},
			{"a body just over the limit", with(`"` + strings.Repeat("b", 4<<20) + `"`), "", 413, "request_too_large"},
			{"negative max tokens", maxTokens("-1"), "", 400, "invalid_value"},
			{"huge max tokens", maxTokens("1e30"), "", 400, "invalid_type"},
			{"max tokens past int32", maxTokens("4294967296"), "", 400, "invalid_value"},
			{"unknown model", func(p string) string { return strings.Replace(with(`"x"`)(p), "sim-model", "no-such-model", 1) }, "", 404, "model_not_found"},
			{"wrong content type", with(`"x"`), "text/plain", 415, "unsupported_media_type"},
			{"form content type", with(`"x"`), "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
			{"duplicate keys", func(p string) string {
				return strings.Replace(with(`"x"`)(p), `{"model":"sim-model"`, `{"model":"sim-model","model":"other"`, 1)
			}, "", 400, "invalid_json"},
			{"not an object", func(string) string { return `["model","sim-model"]` }, "", 400, "invalid_type"},
			{"empty body", func(string) string { return "" }, "", 400, "invalid_json"},
		}
		for path := range valid {
			for _, tc := range cases {
				req, _ := http.NewRequest("POST", g.url+path, strings.NewReader(tc.body(path)))
				if tc.ctype != "" {
					req.Header.Set("Content-Type", tc.ctype)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("%s on %s: %v", tc.name, path, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantAPIError(t, tc.name, path, resp.StatusCode, resp.Header, string(b), tc.status, tc.code)
			}

			// Content-Length and Transfer-Encoding both: the chunked framing wins (RFC 9112
			// §6.3), so the gateway reads the whole body — here one whose max tokens are
			// refused — and not the shorter Content-Length, which would end it early.
			bad := maxTokens("-7")(path)
			raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", path, len(bad), bad)
			resp, b := rawAnswer(t, addr, raw)
			wantAPIError(t, "Content-Length and Transfer-Encoding", path, resp.StatusCode, resp.Header, b, 400, "invalid_value")

			// HTTP/1.0: answered as any client, and the connection closed after it.
			raw = fmt.Sprintf("POST %s HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(bad), bad)
			resp, b = rawAnswer(t, addr, raw)
			wantAPIError(t, "HTTP/1.0", path, resp.StatusCode, resp.Header, b, 400, "invalid_value")
			good := with(`"x"`)(path)
			raw = fmt.Sprintf("POST %s HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(good), good)
			if resp, b := rawAnswer(t, addr, raw); resp.StatusCode != 200 {
				t.Errorf("a valid request over HTTP/1.0 on %s: %d %s", path, resp.StatusCode, b)
			}
		}
		// Of all that, only the three valid HTTP/1.0 requests reached the replica.
		if n := len(s.Records()); n != 3 {
			t.Errorf("the replica got %d requests, want the 3 valid ones", n)
		}
	}()
}

// gwHandle is a gateway a test closes itself, before checking for leaked goroutines.
type gwHandle struct {
	url   string
	close func()
}

func startTenantGWNoCleanup(t *testing.T, sims []*sim.Server, configure func(*config.Config)) gwHandle {
	t.Helper()
	var reps []config.Replica
	for _, s := range sims {
		reps = append(reps, config.Replica{Name: s.Name(), URL: s.URL()})
	}
	cfg := &config.Config{Models: []config.Model{{Name: "sim-model", Replicas: reps}}, Store: "memory:"}
	if configure != nil {
		configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, srv := newGatewayServer(t, cfg)
	return gwHandle{url: srv.URL, close: func() {
		srv.Close()
		gw.Close()
	}}
}

func newGatewayServer(t *testing.T, cfg *config.Config) (*gateway.Server, *httptest.Server) {
	t.Helper()
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	return gw, h1servertest.NewServer(gw.Handler())
}
