package balance

import (
	"testing"
	"time"
)

// cachedPool is three replicas of one tier, each with a record, under CacheAware with the
// given bound and slack.
func cachedPool(bound float64, slack int) *Pool {
	p := &Pool{Model: "m", Limits: Limits{AffinityBound: bound, AffinitySlack: slack, CacheAware: true}}
	for _, n := range []string{"a", "b", "c"} {
		p.Replicas = append(p.Replicas, &Replica{Name: n, Prefix: NewPrefixRecord(1000)})
	}
	return p
}

// The slack keeps a prompt where its prefix is while the replica has at most that many
// requests more than the least loaded, whatever the ratio, and one more for every
// exclusiveBlocksPerRequest blocks of the prompt no other replica holds; beyond it, or
// without it, the ratio alone decides.
func TestAffinitySlackKeepsPromptWithItsPrefix(t *testing.T) {
	now := time.Unix(1000, 0)
	blocks := PrefixBlocks(0, prompt(20*PrefixBlockBytes, 4))
	for _, c := range []struct {
		slack, load int
		want        string
	}{
		// b alone holds the prompt's 20 blocks: one request more of slack (20 / 16).
		{slack: 8, load: 12, want: "b"}, // 12 − 3 = 9 more: within 8 + 1 (and beyond 1.5 × (3 + 1) = 6)
		{slack: 8, load: 13, want: "a"}, // 10 more: beyond both
		{slack: 0, load: 12, want: "a"}, // no slack: the ratio alone, whatever b holds
		{slack: 0, load: 6, want: "b"},  // within the ratio
	} {
		p := cachedPool(1.5, c.slack)
		a, b, cc := p.Replicas[0], p.Replicas[1], p.Replicas[2]
		b.Prefix.Insert(blocks)
		a.Outstanding, b.Outstanding, cc.Outstanding = 3, c.load, 5
		if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != c.want {
			t.Errorf("slack %d, b's load %d against the least 3: picked %s, want %s", c.slack, c.load, r.Name, c.want)
		}
	}
	// Affinity off (bound 0): the slack does not bring it back.
	p := cachedPool(0, 8)
	p.Replicas[1].Prefix.Insert(blocks)
	p.Replicas[1].Outstanding = 1
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "a" {
		t.Errorf("with affinity off picked %s, want the least loaded a", r.Name)
	}
}

// A prompt whose longest prefix is on a replica beyond the bound goes to the replica within
// it that holds the next longest — a new turn of a conversation whose replica is busy goes
// where its system prompt is — and to the least loaded only when no replica within the
// bound holds any of it.
func TestPromptBeyondTheBoundGoesToTheNextLongestPrefix(t *testing.T) {
	now := time.Unix(1000, 0)
	conv := PrefixBlocks(0, prompt(20*PrefixBlockBytes, 6))
	p := cachedPool(1.5, 0)
	a, b, c := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	a.Prefix.Insert(conv[:16]) // the conversation so far
	b.Prefix.Insert(conv[:5])  // its system prompt
	a.Outstanding, b.Outstanding, c.Outstanding = 9, 1, 0
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r.Name != "b" {
		t.Fatalf("a beyond the bound (9 > 1.5 × 1): picked %s, want b (1 <= 1.5), which holds the next longest prefix", r.Name)
	}
	b.Outstanding = 4 // beyond the bound too: 4 > 1.5
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r.Name != "c" {
		t.Fatalf("a and b beyond the bound: picked %s, want the least loaded c", r.Name)
	}
	// Two within the bound hold the next longest alike: the less loaded of them.
	b.Outstanding = 1
	c.Prefix.Insert(conv[:5])
	c.Outstanding = 0
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r.Name != "c" {
		t.Fatalf("b and c hold 5 blocks each: picked %s, want the less loaded c", r.Name)
	}
}

// What only the preferred replica holds of a prompt grows its slack; a prefix another
// replica holds too does not: the prompt moves there for nothing.
func TestSlackGrowsWithWhatOnlyThePreferredReplicaHolds(t *testing.T) {
	now := time.Unix(1000, 0)
	conv := PrefixBlocks(0, prompt(80*PrefixBlockBytes, 8)) // a system prompt of 64 blocks, then history
	p := cachedPool(1.5, 2)
	a, b, c := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	a.Prefix.Insert(conv) // the conversation so far: 80 blocks, 5 requests' worth, a alone
	a.Outstanding, b.Outstanding, c.Outstanding = 9, 2, 2
	// 9 − 2 = 7 more: beyond the slack of 2, within 2 + 80 / 16.
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r != a {
		t.Fatalf("picked %s, want a, which alone holds the conversation", r.Name)
	}
	// b holds the system prompt too: a's own is the history, 16 blocks, one request.
	b.Prefix.Insert(conv[:64])
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r != b {
		t.Fatalf("picked %s, want b: a's extra is its 16 blocks of history (7 > 2 + 1), b holds the rest", r.Name)
	}
	// A prompt both hold whole: no extra for either; the one beyond the slack gives way.
	shared := PrefixBlocks(0, prompt(64*PrefixBlockBytes, 8))
	if r := p.PickPrompt(now, nil, 0, shared).Replica; r == a {
		t.Fatalf("a prompt b holds as well as a went to a, 7 beyond the least loaded")
	}
}

// When the longest prefix's holder is beyond the bound, the replica holding the next
// longest earns slack too for what it holds beyond the least loaded — one request at
// most: a conversation's system prompt is not prefilled again on a replica holding none of
// it for one request of imbalance, and it is for two.
func TestNextLongestPrefixEarnsOneRequestOfSlack(t *testing.T) {
	now := time.Unix(1000, 0)
	conv := PrefixBlocks(0, prompt(80*PrefixBlockBytes, 8)) // a system prompt of 40 blocks, then history
	p := cachedPool(1.5, 2)
	a, b, c := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	a.Prefix.Insert(conv)      // the conversation so far, 80 blocks
	b.Prefix.Insert(conv[:40]) // its system prompt: 40 blocks beyond c's nothing, worth 2 requests, capped at 1
	a.Outstanding, c.Outstanding = 20, 2
	for _, tc := range []struct {
		load int
		want *Replica
	}{
		{load: 4, want: b}, // 2 more than c: within the slack of 2
		{load: 5, want: b}, // 3 more: within 2 + 1 (and beyond 1.5 × (2 + 1))
		{load: 6, want: c}, // 4 more: beyond 2 + 1, though b holds 2 requests' worth
	} {
		b.Outstanding = tc.load
		if r := p.PickPrompt(now, nil, 0, conv).Replica; r != tc.want {
			t.Errorf("a beyond the bound, b %d requests against c's 2: picked %s, want %s", tc.load, r.Name, tc.want.Name)
		}
	}
	// What c holds as well earns b nothing.
	c.Prefix.Insert(conv[:40])
	b.Outstanding = 5
	if r := p.PickPrompt(now, nil, 0, conv).Replica; r != c {
		t.Errorf("b and c hold the system prompt alike, b 3 requests more: picked %s, want c", r.Name)
	}
}
