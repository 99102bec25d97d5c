package sim

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/kvevents"
)

func TestPrefixCacheHitsOnRepeatedPrompt(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	words := strings.Repeat("lorem ipsum dolor sit amet ", 20) // 100 tokens
	send := func(content string) Record {
		postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(content, map[string]any{"max_tokens": 1})), nil)
		n := len(s.Records())
		return waitRecord(t, s, func(r Record) bool { return ended(r) && r.ID == s.Records()[n-1].ID })
	}
	first := send(words)
	if first.PromptTokens != 105 || first.CachedTokens != 0 {
		t.Fatalf("first request: %+v", first)
	}
	// The whole prompt is known, but the last token is always computed:
	// full blocks within the first 104 tokens hit, 6 blocks of 16.
	second := send(words)
	if second.CachedTokens != 96 {
		t.Errorf("repeated prompt: %d cached tokens, want 96", second.CachedTokens)
	}
	// A prompt that shares only its first 40 tokens hits the 2 full blocks
	// within them; block hashes are chained, so nothing after the first
	// difference can hit.
	other := send(strings.Repeat("lorem ipsum dolor sit amet ", 7) + strings.Repeat("x ", 80))
	if other.CachedTokens != 32 {
		t.Errorf("shared prefix: %d cached tokens, want 32", other.CachedTokens)
	}
	m := scrape(t, s)
	if got := metricValue(t, m, "vllm:prefix_cache_hits_total", `model_name="sim-model"`); got != 128 {
		t.Errorf("prefix_cache_hits = %v, want 128", got)
	}
	if got := metricValue(t, m, "vllm:prefix_cache_queries_total"); got != float64(105+105+other.PromptTokens) {
		t.Errorf("prefix_cache_queries = %v", got)
	}

	s.Crash() // a restarted engine has a cold cache
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if again := send(words); again.CachedTokens != 0 {
		t.Errorf("after a crash: %d cached tokens, want 0", again.CachedTokens)
	}
}

func TestPrefixCacheNextChatTurnHitsAnswer(t *testing.T) {
	cache := newPrefixCache(16, 1024)
	turn1 := RenderChat([]Message{{Role: "user", Content: strings.Repeat("hello world ", 10)}})
	answer := Tokens("sim", 0, turn1, 30)
	ids := tokenIDs(turn1)
	for _, w := range answer {
		ids = append(ids, pieceID(strings.TrimSpace(w)))
	}
	cache.insert(ids, 0) // what a finished request caches: prompt and answer
	turn2 := RenderChat([]Message{
		{Role: "user", Content: strings.Repeat("hello world ", 10)},
		{Role: "assistant", Content: strings.Join(answer, "")},
		{Role: "user", Content: "and then?"},
	})
	want := len(ids) / 16 * 16
	if got := cache.lookup(tokenIDs(turn2)); got != want {
		t.Errorf("second turn: %d cached tokens, want %d (all full blocks of turn one and its answer)", got, want)
	}
}

func TestPrefixCacheEvictsLeastRecentlyUsed(t *testing.T) {
	cache := newPrefixCache(2, 2) // room for two blocks
	a := []uint32{1, 2, 3}        // one full block (the last token never hits)
	b := []uint32{5, 6, 7}
	c := []uint32{9, 9, 9}
	cache.insert(a, 0)
	cache.insert(b, 0)
	cache.lookup(a)    // a is now more recent than b
	cache.insert(c, 0) // evicts b
	if cache.lookup(a) != 2 || cache.lookup(b) != 0 || cache.lookup(c) != 2 {
		t.Errorf("hits a=%d b=%d c=%d, want 2 0 2", cache.lookup(a), cache.lookup(b), cache.lookup(c))
	}
}

// A prompt's tail is evicted before its head, as vLLM frees a request's blocks in
// reverse order: once a second prompt needs room, the first keeps its leading blocks
// and still hits on them.
func TestPrefixCacheEvictsTailFirst(t *testing.T) {
	cache := newPrefixCache(2, 4) // room for four blocks
	a := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 0}
	b := []uint32{11, 12, 13, 14, 0}
	cache.insert(a, 0) // four blocks
	cache.insert(b, 0) // two more: two of a's go, its last two
	if got := cache.lookup(a); got != 4 {
		t.Errorf("a hits %d tokens after eviction, want its first two blocks: 4", got)
	}
	if got := cache.lookup(b); got != 4 {
		t.Errorf("b hits %d, want 4", got)
	}
}

// Two requests that prefill the same new prompt at once both cache its blocks, as vLLM's
// cache does (it keeps a block for every request that computed it): the two copies take
// twice the room and are both published, a later request hits them and caches nothing
// new, and evicting one copy publishes its removal while the prompt still hits the other.
func TestPrefixCacheKeepsACopyPerRequestThatComputedIt(t *testing.T) {
	cache := newPrefixCache(2, 6) // room for six blocks of two tokens
	var stored, removed []kvevents.Hash
	cache.publish = func(events []kvevents.Event) {
		for _, e := range events {
			switch e.Kind {
			case kvevents.Stored:
				stored = append(stored, e.Hashes...)
			case kvevents.Removed:
				removed = append(removed, e.Hashes...)
			}
		}
	}
	a := []uint32{1, 2, 3, 4, 5} // two full blocks
	if cache.lookup(a) != 0 || cache.lookup(a) != 0 {
		t.Fatal("a hit before anything was cached")
	}
	cache.insert(a, 0) // both requests computed both blocks
	cache.insert(a, 0)
	if cache.len() != 4 || len(stored) != 4 {
		t.Fatalf("%d blocks cached, %d stored; want 4 and 4: a copy per request", cache.len(), len(stored))
	}
	if got := cache.lookup(a); got != 4 {
		t.Fatalf("a third request hits %d tokens, want 4", got)
	}
	cache.insert(a, 2) // its blocks were the cache's: nothing new
	if cache.len() != 4 || len(stored) != 4 {
		t.Fatalf("after a request that hit: %d blocks cached, %d stored; want 4 and 4", cache.len(), len(stored))
	}
	cache.insert([]uint32{7, 8, 9, 10, 0}, 0)    // two more blocks: the cache is full
	cache.insert([]uint32{11, 12, 13, 14, 0}, 0) // two more: the two copies used least recently go
	want := cache.blockHashes(a, -1)
	if len(removed) != 2 || removed[0] != kvevents.IntHash(want[1]) || removed[1] != kvevents.IntHash(want[0]) {
		t.Fatalf("removed %x; want the unused copies of a's blocks, its tail first", removed)
	}
	if got := cache.lookup(a); got != 4 {
		t.Errorf("a hits %d tokens once one copy of each block is gone, want 4", got)
	}
}
