package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/secretfile"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/tidwall/gjson"
	"go.uber.org/goleak"
)

// The HTTP server's hangup watcher lives as long as the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/fencegate/fencegate/internal/h1server.(*hangupWatcher).run"))
}

// testTimeout bounds every wait in a test; a safety net against a hung test,
// never a pacing device.
const testTimeout = 20 * time.Second

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock is a clock that moves only when the test says so. With it, a
// lease expires exactly when the test advances past its expiry, never
// because the machine was slow.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startSim starts a simulated engine closed when the test ends.
func startSim(t testing.TB, cfg sim.Config) *sim.Server {
	t.Helper()
	s, err := sim.Start(cfg)
	if err != nil {
		t.Fatalf("sim.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startAgent starts an agent in front of engine, closed when the test ends
// (before the engine, since cleanups run last-in first-out).
func startAgent(t testing.TB, cfg Config) *Agent {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	a, err := Start(cfg)
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("agent.Close: %v", err)
		}
	})
	return a
}

// newHTTPClient returns a client with a connection per request, so a broken
// stream never leaks into the next request through the idle pool.
func newHTTPClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// controlClient returns a control client for a, with secret.
func controlClient(t testing.TB, a *Agent, secret string) *Client {
	return &Client{BaseURL: a.URL(), Secret: secretfile.Fixed(secret), HTTP: newHTTPClient(t)}
}

// chatBody is a deterministic chat request for the sim's default model: a
// fixed seed, and ignore_eos so it runs to maxTokens.
func chatBody(t testing.TB, maxTokens int, stream bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"model":      "sim-model",
		"messages":   []map[string]any{{"role": "user", "content": "tell me about leases and fences"}},
		"max_tokens": maxTokens,
		"stream":     stream,
		"seed":       7,
		"ignore_eos": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// leased describes the lease headers of one fenced request.
type leased struct {
	attempt string
	epoch   uint64
	ttl     time.Duration
}

// post sends body to baseURL+path, with lease headers when l is not nil.
func post(t testing.TB, ctx context.Context, hc *http.Client, baseURL, path string, body []byte, l *leased) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if l != nil {
		SetLeaseHeaders(req.Header, l.attempt, l.epoch, l.ttl, "gw-test")
	}
	return hc.Do(req)
}

// streamRead is what a client got from one stream.
type streamRead struct {
	events []sse.Event // Raw and Data copied
	done   bool        // a data: [DONE] event arrived
	err    error       // nil when the stream ended cleanly
}

// contents returns the concatenated delta contents and the finish reasons.
func (s streamRead) contents() (text string, finish []string) {
	for _, ev := range s.events {
		if ev.Class&sse.Done != 0 {
			continue
		}
		text += gjson.GetBytes(ev.Data, "choices.0.delta.content").String()
		if f := gjson.GetBytes(ev.Data, "choices.0.finish_reason"); f.Exists() && f.Type != gjson.Null {
			finish = append(finish, f.String())
		}
	}
	return text, finish
}

// readStream reads an SSE body to its end. onEvent, when not nil, is called
// after each event with the number of events read so far.
func readStream(body io.Reader, onEvent func(n int)) streamRead {
	var out streamRead
	var dec sse.Decoder
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			dec.Append(buf[:n])
			for {
				ev, ok := dec.Next()
				if !ok {
					break
				}
				ev.Raw = bytes.Clone(ev.Raw)
				ev.Data = bytes.Clone(ev.Data)
				out.events = append(out.events, ev)
				if ev.Class&sse.Done != 0 {
					out.done = true
				}
				if onEvent != nil {
					onEvent(len(out.events))
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
	}
}

// waitEnded waits for attempt to end on a.
func waitEnded(t testing.TB, a *Agent, attempt string) AttemptInfo {
	t.Helper()
	info, err := a.WaitEnded(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitSimRecord waits for the sim's record of attempt to satisfy cond.
func waitSimRecord(t testing.TB, s *sim.Server, attempt string, cond func(sim.Record) bool) sim.Record {
	t.Helper()
	rec, err := s.WaitRecord(testContext(t), func(r sim.Record) bool { return r.AttemptID == attempt && cond(r) })
	if err != nil {
		t.Fatalf("waiting for the sim's record of %s: %v", attempt, err)
	}
	return rec
}

func simEnded(r sim.Record) bool { return r.Outcome != "" }

// renew renews leases at the agent and fails the test on error.
func renew(t testing.TB, c *Client, ttl time.Duration, leases ...lease.Lease) RenewReply {
	t.Helper()
	reply, err := c.Renew(testContext(t), RenewRequest{Gateway: "gw-test", TTLms: ttl.Milliseconds(), Leases: leases})
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	return reply
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
