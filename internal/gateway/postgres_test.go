package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
)

// Several gateways on one PostgreSQL database: gateway A runs in its own process (so it
// can be killed with SIGKILL), gateway B in this one.

func openStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pastLease is a clock beyond a dead gateway's 1s owner lease.
func pastLease() time.Time { return time.Now().Add(2 * time.Second) }

const longKeyed = `{"model":"sim-model","stream":true,"max_tokens":100,"temperature":0,"ignore_eos":true,"messages":[{"role":"user","content":"shared"}]}`

// readUntilContent reads a stream until the first content chunk arrived.
func readUntilContent(t *testing.T, resp *http.Response) {
	t.Helper()
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, `"content":" `) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended before any content (%v): %q", err, got)
		}
		got += string(buf[:n])
	}
}

func TestPostgresTwoGateways(t *testing.T) {
	dsn := pgtest.Schema(t)
	slow := startSim(t, sim.Config{Name: "sim-1", DecodePerToken: 20 * time.Millisecond})
	st := openStore(t, dsn)

	t.Run("in progress on A is 409 on B, then A dies after the boundary: B answers with the interruption", func(t *testing.T) {
		a := startChild(t, childYAML(dsn, "gw-a", slow.URL()))
		resp := post(t, a.url+"/v1/chat/completions", longKeyed, "Idempotency-Key", "k-boundary")
		id := resp.Header.Get("X-Request-Id")
		readUntilContent(t, resp)
		b := newEnv(t, envOptions{sims: []*sim.Server{slow}, store: st})
		busy := post(t, b.srv.URL+"/v1/chat/completions", longKeyed, "Idempotency-Key", "k-boundary")
		if body := readAll(t, busy); busy.StatusCode != http.StatusConflict || !strings.Contains(body, "idempotency_key_in_use") {
			t.Fatalf("B while A streams: %d %s", busy.StatusCode, body)
		}
		a.kill()
		b2 := newEnv(t, envOptions{sims: []*sim.Server{slow}, store: st, now: pastLease})
		retry := post(t, b2.srv.URL+"/v1/chat/completions", longKeyed, "Idempotency-Key", "k-boundary")
		if body := readAll(t, retry); retry.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream_decode_interrupted") ||
			retry.Header.Get("X-Request-Id") != id {
			t.Fatalf("B after A died past the boundary: %d %s", retry.StatusCode, body)
		}
	})

	t.Run("A dies before the boundary: B takes over and completes under the same request id", func(t *testing.T) {
		hang := startSim(t, sim.Config{Name: "sim-hang"})
		if err := hang.ArmFault("hang@prefill", 1); err != nil {
			t.Fatal(err)
		}
		a := startChild(t, childYAML(dsn, "gw-a2", hang.URL()))
		done := make(chan *http.Response, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/chat/completions", strings.NewReader(longKeyed))
			req.Header.Set("Idempotency-Key", "k-before")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- resp
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		first, err := hang.WaitRecord(ctx, func(r sim.Record) bool { return strings.HasSuffix(r.AttemptID, ".a1") })
		if err != nil {
			t.Fatal(err)
		}
		a.kill()
		<-done
		b := newEnv(t, envOptions{sims: []*sim.Server{hang}, store: st, now: pastLease})
		retry := post(t, b.srv.URL+"/v1/chat/completions", longKeyed, "Idempotency-Key", "k-before")
		body := readAll(t, retry)
		if retry.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || retry.Header.Get("X-Request-Id") != first.RequestID {
			t.Fatalf("takeover: %d %q (want request %s)", retry.StatusCode, body, first.RequestID)
		}
		rec := b.record(first.RequestID)
		if rec.Outcome != "completed" || rec.Attempts[len(rec.Attempts)-1].ID != first.RequestID+".a2" {
			t.Fatalf("journal after takeover: %+v", rec)
		}
		if got, err := hang.WaitRecord(ctx, func(r sim.Record) bool { return r.AttemptID == first.AttemptID && r.Outcome != "" }); err != nil || (got.Outcome != "hung" && got.Outcome != "cancelled") {
			t.Fatalf("the dead gateway's attempt was not closed: %+v %v", got, err)
		}
	})

	t.Run("completed on A is replayed by B", func(t *testing.T) {
		a := startChild(t, childYAML(dsn, "gw-a3", slow.URL()))
		short := strings.Replace(longKeyed, `"max_tokens":100`, `"max_tokens":3`, 1)
		resp := post(t, a.url+"/v1/chat/completions", short, "Idempotency-Key", "k-done")
		want := readAll(t, resp)
		b := newEnv(t, envOptions{sims: []*sim.Server{slow}, store: st})
		b.record(resp.Header.Get("X-Request-Id"))
		again := post(t, b.srv.URL+"/v1/chat/completions", short, "Idempotency-Key", "k-done")
		if got := readAll(t, again); again.StatusCode != 200 || got != want || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay on B: %d %q, want %q", again.StatusCode, got, want)
		}
		other := post(t, b.srv.URL+"/v1/chat/completions", strings.Replace(short, "shared", "other", 1), "Idempotency-Key", "k-done")
		if other.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("different body: %d", other.StatusCode)
		}
	})

	t.Run("first use of a key raced from two gateways: exactly one proceeds", func(t *testing.T) {
		b := newEnv(t, envOptions{sims: []*sim.Server{slow}, store: st})
		c := newEnv(t, envOptions{sims: []*sim.Server{slow}, store: openStore(t, dsn)})
		for round := 0; round < 6; round++ {
			key := "k-race-" + string(rune('a'+round))
			var wg sync.WaitGroup
			codes := make([]int, 2)
			for i, url := range []string{b.srv.URL, c.srv.URL} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(longKeyed))
					req.Header.Set("Idempotency-Key", key)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					codes[i] = resp.StatusCode
				}()
			}
			wg.Wait()
			if !(codes[0] == 200 && codes[1] == 409) && !(codes[0] == 409 && codes[1] == 200) {
				t.Fatalf("round %d: statuses %v, want one 200 and one 409", round, codes)
			}
		}
	})
}
