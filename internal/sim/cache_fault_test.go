package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// With the block-boundary cache fault, a prompt of k·block_size+1 tokens answers otherwise
// the second time, when all of it but its last token comes from the cache; prompts whose
// cached part leaves more than the last token to compute, cold prompts, and replicas
// without the fault answer alike both times. Prefill costs count cached tokens as always.
func TestCacheFaultBlockBoundary(t *testing.T) {
	faulty := startSim(t, Config{CacheFault: CacheFaultBlockBoundary, CacheConfig: map[string]string{"block_size": "8"}})
	healthy := startSim(t, Config{CacheConfig: map[string]string{"block_size": "8"}})
	c := newClient(t)
	complete := func(s *Server, prompt string) (string, Record) {
		t.Helper()
		status, body := postJSON(t, c, s.URL()+"/v1/completions", jsonBody(t, map[string]any{
			"model": "sim-model", "prompt": prompt, "max_tokens": 8, "temperature": 0, "seed": 7}), nil)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		var out struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("answer %s: %v", body, err)
		}
		recs := s.Records()
		return out.Choices[0].Text, recs[len(recs)-1]
	}
	prompt := func(nonce string, n int) string {
		return nonce + strings.Repeat(" w", n-1) // one token each
	}
	for _, tc := range []struct {
		n       int
		cached  int
		changed bool
	}{
		{15, 8, false}, {16, 8, false}, {17, 16, true}, {23, 16, false}, {25, 24, true},
	} {
		for _, s := range []*Server{faulty, healthy} {
			p := prompt(fmt.Sprintf("nonce%d%s", tc.n, s.Name()), tc.n)
			cold, rc := complete(s, p)
			warm, rw := complete(s, p)
			if rc.PromptTokens != tc.n || rc.CachedTokens != 0 || rw.CachedTokens != tc.cached {
				t.Fatalf("%d tokens: cold %+v, warm %+v", tc.n, rc, rw)
			}
			want := tc.changed && s == faulty
			if (cold != warm) != want {
				t.Errorf("%d tokens, fault %v: cold %q, warm %q", tc.n, s == faulty, cold, warm)
			}
			if again, _ := complete(s, p); again != warm {
				t.Errorf("%d tokens: the warm answer is not stable: %q then %q", tc.n, warm, again)
			}
		}
	}
	if _, err := (Config{CacheFault: "everywhere"}).withDefaults(); err == nil {
		t.Error("an unknown cache fault was accepted")
	}
}
