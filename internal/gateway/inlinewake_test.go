package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
)

// The owner of a stream waits on the engine's socket between tokens (docs/design.md §6):
// what else must reach it wakes that wait. A replica declared dead while its stream is
// silent after its two tokens ends the request at once with an honest interruption, long
// before the idle timeout, which is set so that only the wake can end it in the test's
// time.
func TestDeclaredDeadWakesSilentStream(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.IdleTimeout = config.Duration(time.Hour)
	}})
	e.armAll("hang@sent:1") // two tokens, then silence
	s := e.client.Chat.Completions.NewStreaming(testCtx(t), chatParams("speak, then fall silent", 12))
	defer s.Close()
	content, declared := 0, false
	for s.Next() {
		if len(s.Current().Choices) == 0 || s.Current().Choices[0].Delta.Content == "" {
			continue
		}
		if content++; content == 2 && !declared {
			declared = true
			for _, replica := range []string{"sim-1", "sim-2"} {
				resp := post(t, e.admin.URL+"/admin/replicas/sim-model/"+replica, `{"state":"dead","reason":"node lost"}`)
				if b := readAll(t, resp); resp.StatusCode != 200 {
					t.Fatalf("admin: %d %s", resp.StatusCode, b)
				}
			}
		}
	}
	if !declared {
		t.Fatalf("the stream ended after %d content chunks, before the replica was declared dead: %v", content, s.Err())
	}
	ev := interruption(t, s.Err())
	if ev["code"] != "upstream_decode_interrupted" || ev["delivered_output_tokens"] != float64(2) {
		t.Fatalf("interruption event %v", ev)
	}
	var id string
	for _, sm := range e.sims {
		for _, r := range sm.Records() {
			id = r.RequestID
		}
	}
	rec := e.record(id)
	if rec.Outcome != "interrupted" || len(rec.Attempts) != 1 || !strings.Contains(rec.Attempts[0].EndReason, "declared_dead") {
		t.Fatalf("journal %+v", rec)
	}
}
