package gateway_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
)

// outcomeWatch is a store that notes how many bytes the gateway had written to its
// clients' connections when a request's outcome became durable.
type outcomeWatch struct {
	store.Store
	writes  *recordedWrites
	durable chan int64
}

func (s *outcomeWatch) Apply(ctx context.Context, muts []store.Mutation) error {
	err := s.Store.Apply(ctx, muts)
	for _, m := range muts {
		if u, ok := m.(store.UpdateRequest); ok && u.Outcome != "" && err == nil {
			select {
			case s.durable <- s.writes.written.Load():
			default:
			}
		}
	}
	return err
}

// A keyed request's outcome is durable before its client sees the end of the answer, also
// when the answer is larger than the response writer's buffer (two 384-dimension
// embeddings, over 4 KiB of JSON): none of it reaches the connection before the outcome is
// journaled, and a retry sent the instant the body is read is answered with the replay,
// never 409 idempotency_key_in_use.
func TestKeyedWholeAnswerDurableBeforeItsEnd(t *testing.T) {
	writes := &recordedWrites{}
	st := &outcomeWatch{Store: store.NewMemory(), writes: writes, durable: make(chan int64, 1)}
	e := newEnv(t, envOptions{replicas: 1, store: st, sim: func(_ int, c *sim.Config) { c.Task = sim.TaskEmbed }})
	srv := h1servertest.Serve(recordingListener{listenLoopback(t), writes}, e.gw.Handler())
	t.Cleanup(srv.Close)

	const body = `{"model":"sim-model","input":["the first text to embed","the second text to embed"]}`
	first := post(t, srv.URL+"/v1/embeddings", body, "Idempotency-Key", "k-large-whole")
	answer, err := io.ReadAll(first.Body)
	if err != nil {
		t.Fatal(err)
	}
	again := post(t, srv.URL+"/v1/embeddings", body, "Idempotency-Key", "k-large-whole")
	replayed := readAll(t, again)

	if first.StatusCode != 200 || len(answer) <= 4<<10 || !bytes.Contains(answer, []byte(`"embedding"`)) {
		t.Fatalf("first answer: %d, %d bytes; the test needs a whole answer over 4 KiB", first.StatusCode, len(answer))
	}
	if n := <-st.durable; n >= int64(len(answer)) {
		t.Fatalf("%d bytes were on the connection when the outcome became durable: the %d-byte answer reached its client first", n, len(answer))
	}
	if again.StatusCode != 200 || again.Header.Get("Idempotent-Replayed") != "true" || replayed != string(answer) {
		t.Fatalf("retry sent as the answer was read: %d %v %.200s", again.StatusCode, again.Header, strings.TrimSpace(replayed))
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d engine requests, want 1", n)
	}
}
