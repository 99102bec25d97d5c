package gateway

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/openai"
)

// A prompt is hashed only as far as the pool's largest record can hold of it (no record
// matches more), and not at all for a pool that is not cache-aware.
func TestPromptBlocksStopAtTheLargestRecord(t *testing.T) {
	for _, c := range []struct {
		policy string
		want   int
	}{{config.AffinityCacheAware, 300}, {config.AffinityPrefixHash, 0}} {
		cfg, err := config.Parse([]byte("models:\n  - name: m\n    affinity: {policy: " + c.policy + "}\n    replicas: [{url: 'http://127.0.0.1:1'}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		p := newPool(cfg.Models[0], cfg, time.Unix(1000, 0))
		for i, capacity := range []int{100, 300, 200} {
			p.b.Replicas = append(p.b.Replicas, &balance.Replica{Name: string(rune('a' + i)), Prefix: balance.NewPrefixRecord(capacity)})
		}
		limit := p.promptBlockLimit()
		if limit != c.want {
			t.Fatalf("%s: limit %d, want %d", c.policy, limit, c.want)
		}
		body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a long prompt ", 10_000) + `"}]}`
		_, members, perr := openai.Parse(openai.Chat, []byte(body), 0)
		if perr != nil {
			t.Fatal(perr)
		}
		got := promptBlocks(openai.Chat, members, limit)
		if len(got) != c.want {
			t.Fatalf("%s: %d blocks, want %d", c.policy, len(got), c.want)
		}
		if all := promptBlocks(openai.Chat, members, 1<<20); c.want > 0 && (len(all) <= c.want || !slices.Equal(got, all[:c.want])) {
			t.Fatalf("%s: the limited blocks are not the first %d of the prompt's %d", c.policy, c.want, len(all))
		}
	}
}
