package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
)

const keyedBody = `{"model":"sim-model","stream":true,"max_tokens":8,"temperature":0,"ignore_eos":true,"messages":[{"role":"user","content":"keyed"}]}`

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A completed keyed request is replayed byte for byte; the same key with another body is
// refused with 422.
func TestIdempotencyReplayAndMismatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-replay")
	body1 := readAll(t, first)
	id := first.Header.Get("X-Request-Id")
	if first.StatusCode != 200 || !strings.HasSuffix(body1, "data: [DONE]\n\n") {
		t.Fatalf("first: %d %q", first.StatusCode, body1)
	}
	e.record(id) // wait until the outcome is journaled
	again := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-replay")
	body2 := readAll(t, again)
	if again.StatusCode != 200 || again.Header.Get("Idempotent-Replayed") != "true" || body2 != body1 ||
		again.Header.Get("X-Request-Id") != id || again.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("replay: %d %v %q", again.StatusCode, again.Header, body2)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d upstream requests, want 1 (the replay must not reach a replica)", n)
	}
	other := post(t, e.srv.URL+"/v1/chat/completions", strings.Replace(keyedBody, "keyed", "different", 1), "Idempotency-Key", "k-replay")
	if b := readAll(t, other); other.StatusCode != 422 || !strings.Contains(b, `"code":"idempotency_key_reused"`) {
		t.Fatalf("mismatch: %d %s", other.StatusCode, b)
	}
}

// An interrupted keyed request answers every retry with the same interruption, never a
// silent rerun.
func TestIdempotencyInterruptedIsNotRerun(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.armAll("crash@sent:1")
	first := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-int")
	readAll(t, first)
	e.record(first.Header.Get("X-Request-Id"))
	again := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-int")
	b := readAll(t, again)
	if again.StatusCode != http.StatusBadGateway || again.Header.Get("Idempotent-Replayed") != "true" ||
		!strings.Contains(b, `"code":"upstream_decode_interrupted"`) || !strings.Contains(b, `"delivered_output_tokens":2`) {
		t.Fatalf("retry of an interrupted request: %d %s", again.StatusCode, b)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d upstream requests, want 1", n)
	}
}

// SQLite: a gateway killed with SIGKILL mid-stream. The boundary record of its keyed request
// survives; a new gateway on the same file answers the retry with the interruption once the
// dead gateway's owner lease has run out.
func TestSQLiteKillMidStream(t *testing.T) {
	s := startSim(t, sim.Config{Name: "sim-1", DecodePerToken: 30 * time.Millisecond})
	dsn := "sqlite:" + t.TempDir() + "/fencegate.db"
	a := startChild(t, childYAML(dsn, "gw-a", s.URL()))
	resp := post(t, a.url+"/v1/chat/completions", strings.Replace(keyedBody, `"max_tokens":8`, `"max_tokens":200`, 1), "Idempotency-Key", "k-kill")
	id := resp.Header.Get("X-Request-Id")
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, `"content":" `) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended before any content: %v", err)
		}
		got += string(buf[:n])
	}
	a.kill()

	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.FirstDeltaSent || rec.Phase != store.PhaseStreaming || rec.Outcome != "" || rec.Owner != "gw-a" || rec.IdempotencyKey != "k-kill" {
		t.Fatalf("journal after kill -9: %+v", rec)
	}
	// A second gateway whose clock is past the dead owner's lease.
	b := newEnv(t, envOptions{sims: []*sim.Server{s}, store: st, now: func() time.Time { return time.Now().Add(2 * time.Second) }})
	retry := post(t, b.srv.URL+"/v1/chat/completions", strings.Replace(keyedBody, `"max_tokens":8`, `"max_tokens":200`, 1), "Idempotency-Key", "k-kill")
	body := readAll(t, retry)
	if retry.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream_decode_interrupted") || retry.Header.Get("X-Request-Id") != id {
		t.Fatalf("retry after the owner died: %d %s", retry.StatusCode, body)
	}
	rec, _ = st.Get(context.Background(), id)
	if rec.Outcome != store.OutcomeInterrupted {
		t.Fatalf("journal after the retry: %+v", rec)
	}
}

func startSim(t testing.TB, c sim.Config) *sim.Server {
	t.Helper()
	s, err := sim.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A keyed request whose client went away is not rerun silently under the same key.
func TestIdempotencyCancelled(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond }})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(keyedBody))
	req.Header.Set("Idempotency-Key", "k-gone")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	readUntilContent(t, resp)
	cancel()
	resp.Body.Close()
	if rec := e.record(id); rec.Outcome != "cancelled" {
		t.Fatalf("journal %+v", rec)
	}
	again := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-gone")
	if b := readAll(t, again); again.StatusCode != http.StatusConflict || !strings.Contains(b, "idempotency_key_cancelled") {
		t.Fatalf("retry of a cancelled request: %d %s", again.StatusCode, b)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d upstream requests", n)
	}
}
