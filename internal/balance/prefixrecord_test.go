package balance

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// prompt is n bytes that differ from block to block, so that no two blocks hash alike by
// content alone.
func prompt(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i/PrefixBlockBytes+int(seed))%26
	}
	return b
}

// Blocks are chained: two prompts share exactly the blocks before their first difference,
// however the bytes are split into parts; the partial last block is left out.
func TestPrefixBlocksChain(t *testing.T) {
	base := prompt(10*PrefixBlockBytes+100, 0)
	bs := PrefixBlocks(0, base)
	if len(bs) != 10 {
		t.Fatalf("%d blocks of %d bytes, want 10 (the partial one left out)", len(bs), len(base))
	}
	split := PrefixBlocks(0, base[:3], base[3:700], base[700:])
	if !slices.Equal(bs, split) {
		t.Fatal("the same bytes in other parts hash otherwise")
	}
	changed := bytes.Clone(base)
	changed[4*PrefixBlockBytes+17] ^= 1
	cs := PrefixBlocks(0, changed)
	for i := range bs {
		if same := bs[i] == cs[i]; same != (i < 4) {
			t.Fatalf("block %d equal=%v after a change in block 4", i, same)
		}
	}
	// A block equal in content but under another prefix is another block.
	other := append(prompt(PrefixBlockBytes, 3), base[PrefixBlockBytes:]...)
	if os := PrefixBlocks(0, other); os[1] == bs[1] {
		t.Fatal("block 1 matched under a different block 0")
	}
	if got := PrefixBlocks(3, base); !slices.Equal(got, bs[:3]) {
		t.Fatalf("maxBlocks 3: %d blocks", len(got))
	}
	if PrefixBlocks(0, base[:PrefixBlockBytes-1]) != nil {
		t.Fatal("a prompt shorter than a block has blocks")
	}
}

// Match counts the leading blocks held; eviction drops the least recently used first and,
// within one prompt, its tail before its head, so what is held is a prefix.
func TestPrefixRecordMatchAndEvict(t *testing.T) {
	a := PrefixBlocks(0, prompt(8*PrefixBlockBytes, 0))
	b := PrefixBlocks(0, prompt(8*PrefixBlockBytes, 5))
	r := NewPrefixRecord(12)
	if r.Match(a) != 0 {
		t.Fatal("an empty record matched")
	}
	r.Insert(a)
	if m := r.Match(a); m != 8 {
		t.Fatalf("match %d, want 8", m)
	}
	longer := PrefixBlocks(0, prompt(12*PrefixBlockBytes, 0))
	if m := r.Match(longer); m != 8 {
		t.Fatalf("a longer prompt with a's prefix matched %d, want 8", m)
	}
	// b needs 8 more blocks: 4 of a's go, its tail.
	r.Insert(b)
	if r.Len() != 12 {
		t.Fatalf("%d blocks kept, capacity 12", r.Len())
	}
	if m := r.Match(a); m != 4 {
		t.Fatalf("after eviction a matches %d, want its first 4", m)
	}
	if m := r.Match(b); m != 8 {
		t.Fatalf("b matches %d, want 8", m)
	}
	// Using a again makes it the most recent: b's tail goes next.
	r.Insert(a[:4])
	r.Insert(PrefixBlocks(0, prompt(2*PrefixBlockBytes, 9)))
	if m := r.Match(a); m != 4 {
		t.Fatalf("recently used a matches %d, want 4", m)
	}
	if m := r.Match(b); m != 6 {
		t.Fatalf("b matches %d, want 6 (its tail evicted first)", m)
	}
	r.Clear()
	if r.Len() != 0 || r.Match(b) != 0 {
		t.Fatal("Clear left blocks")
	}
}

// Under CacheAware the prompt goes where the longest prefix is held, within the load
// bound; with no record holding any of it, to the least loaded; the tier still comes first.
func TestPickPromptPrefersLongestCachedPrefix(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Limits = Limits{AffinityBound: 1.5, CacheAware: true}
	for _, r := range p.Replicas {
		r.Prefix = NewPrefixRecord(1000)
	}
	conv := prompt(20*PrefixBlockBytes, 0)
	blocks := PrefixBlocks(0, conv)
	p.Replicas[0].Prefix.Insert(blocks[:5])  // a holds the system prompt
	p.Replicas[1].Prefix.Insert(blocks[:12]) // b holds the conversation so far
	p.Replicas[1].Outstanding = 1            // within the bound: 1 <= 1.5 × (0 + 1)
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "b" {
		t.Fatalf("picked %s, want b (12 blocks cached against a's 5)", r.Name)
	}
	// b is busier than the bound allows: 4 > 1.5 × (0 + 1).
	p.Replicas[1].Outstanding = 4
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "a" {
		t.Fatalf("picked %s, want a (b beyond the load bound)", r.Name)
	}
	// Excluded (tried): the next longest.
	p.Replicas[1].Outstanding = 0
	if r := p.PickPrompt(now, names("b"), 0, blocks).Replica; r.Name != "a" {
		t.Fatalf("picked %s, want a once b is excluded", r.Name)
	}
	// Nothing held: the least loaded.
	p.Replicas[0].Outstanding = 1
	fresh := PrefixBlocks(0, prompt(6*PrefixBlockBytes, 7))
	if r := p.PickPrompt(now, nil, 0, fresh).Replica; r.Name != "b" {
		t.Fatalf("picked %s for an uncached prompt, want the least loaded b", r.Name)
	}
	// Equal matches: the less loaded of the two.
	p.Replicas[0].Prefix.Insert(blocks[:12])
	p.Replicas[0].Outstanding, p.Replicas[1].Outstanding = 1, 0
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "b" {
		t.Fatalf("picked %s, want b (equal match, less loaded)", r.Name)
	}
	// The backup tier holds more, but serves only when tier 0 cannot.
	p.Replicas[2].Prefix.Insert(blocks)
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Priority != 0 {
		t.Fatalf("picked the backup tier %s while tier 0 is up", r.Name)
	}
	// Off: prefix-hash affinity as before.
	p.Limits.CacheAware = false
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "b" {
		t.Fatalf("without CacheAware picked %s, want the least loaded b", r.Name)
	}
}

// A prompt longer than the record keeps its head: the first Capacity blocks.
func TestPrefixRecordLongPromptKeepsItsHead(t *testing.T) {
	r := NewPrefixRecord(8)
	blocks := PrefixBlocks(0, prompt(20*PrefixBlockBytes, 2))
	r.Insert(blocks)
	if r.Len() != 8 || r.Match(blocks) != 8 {
		t.Fatalf("len %d, match %d; want the first 8 blocks", r.Len(), r.Match(blocks))
	}
}

// The record against a plain model of least-recently-used eviction (a slice in recency
// order), over random inserts of prompts that share prefixes: the same blocks held,
// the same matches.
func TestPrefixRecordMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 50 {
		capacity := 1 + rng.IntN(40)
		r := NewPrefixRecord(capacity)
		var model []uint64 // least recent first
		touch := func(h uint64) {
			if i := slices.Index(model, h); i >= 0 {
				model = slices.Delete(model, i, i+1)
			}
			model = append(model, h)
		}
		for range 200 {
			blocks := PrefixBlocks(0, prompt((1+rng.IntN(30))*PrefixBlockBytes, byte(rng.IntN(4))))
			blocks = blocks[:min(len(blocks), capacity)]
			r.Insert(blocks)
			for i := len(blocks) - 1; i >= 0; i-- {
				touch(blocks[i])
				if len(model) > capacity {
					model = model[1:]
				}
			}
			if r.Len() != len(model) {
				t.Fatalf("round %d: %d blocks held, the model %d", round, r.Len(), len(model))
			}
			for _, h := range model {
				if _, ok := r.index[h]; !ok {
					t.Fatalf("round %d: block %x evicted, the model keeps it", round, h)
				}
			}
		}
	}
}

// BenchmarkPrefixBlocks hashes a 1 MiB prompt into blocks.
func BenchmarkPrefixBlocks(b *testing.B) {
	p := prompt(1<<20, 1)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		PrefixBlocks(0, p)
	}
}

// BenchmarkPrefixRecordInsert records a 1 MiB prompt new to a record that holds others.
func BenchmarkPrefixRecordInsert(b *testing.B) {
	r := NewPrefixRecord(1 << 16)
	prompts := make([][]uint64, 8)
	for i := range prompts {
		prompts[i] = PrefixBlocks(0, prompt(1<<20, byte(i)))
	}
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Insert(prompts[i%len(prompts)])
	}
}

// Ties on the longest prefix: when every replica of the tier holds it, the least loaded
// takes the prompt; when only some do, rendezvous hashing of the last block held picks one
// of them, the same one whatever their loads within the bound, so that the requests
// sharing that prefix keep to one replica.
func TestPickPromptTies(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &Pool{Model: "m", Limits: Limits{AffinityBound: 10, CacheAware: true}}
	for _, n := range []string{"a", "b", "c", "d"} {
		p.Replicas = append(p.Replicas, &Replica{Name: n, Prefix: NewPrefixRecord(1000)})
	}
	system := PrefixBlocks(0, prompt(4*PrefixBlockBytes, 3))
	for _, r := range p.Replicas {
		r.Prefix.Insert(system)
	}
	p.Replicas[2].Outstanding, p.Replicas[0].Outstanding, p.Replicas[1].Outstanding, p.Replicas[3].Outstanding = 0, 2, 2, 2
	if r := p.PickPrompt(now, nil, 0, system).Replica; r.Name != "c" {
		t.Fatalf("a prefix every replica holds went to %s, want the least loaded c", r.Name)
	}
	other := PrefixBlocks(0, prompt(4*PrefixBlockBytes, 9))
	p.Replicas[0].Prefix.Insert(other)
	p.Replicas[1].Prefix.Insert(other)
	want := p.Replicas[0]
	if rendezvous(other[3], "b") > rendezvous(other[3], "a") {
		want = p.Replicas[1]
	}
	for _, loads := range [][2]int{{0, 3}, {3, 0}, {1, 1}} {
		p.Replicas[0].Outstanding, p.Replicas[1].Outstanding = loads[0], loads[1]
		if r := p.PickPrompt(now, nil, 0, other).Replica; r != want {
			t.Fatalf("loads %v: a prefix a and b hold went to %s, want %s every time", loads, r.Name, want.Name)
		}
	}
}

func TestPrefixRecordEvictsOldestAndTrims(t *testing.T) {
	r := NewPrefixRecord(10)
	a := PrefixBlocks(0, prompt(6*PrefixBlockBytes, 1))
	b := PrefixBlocks(0, prompt(6*PrefixBlockBytes, 2))
	if added, evicted := r.Insert(a); added != 6 || evicted != 0 {
		t.Fatalf("insert a: added %d evicted %d, want 6 0", added, evicted)
	}
	if added, evicted := r.Insert(b); added != 6 || evicted != 2 {
		t.Fatalf("insert b: added %d evicted %d, want 6 2", added, evicted)
	}
	if added, _ := r.Insert(b[:3]); added != 0 {
		t.Fatalf("insert of held blocks added %d", added)
	}
	// The oldest are a's remaining tail blocks: a keeps a prefix, b is whole.
	if n := r.EvictOldest(3); n != 3 || r.Match(a) != 1 || r.Match(b) != 6 {
		t.Fatalf("evicted %d, a holds %d, b holds %d; want 3, 1, 6", n, r.Match(a), r.Match(b))
	}
	r.Capacity = 4
	if n := r.Trim(); n != 3 || r.Len() != 4 || r.Match(b) != 4 {
		t.Fatalf("trim evicted %d, len %d, b holds %d; want 3, 4, 4", n, r.Len(), r.Match(b))
	}
	if n := r.EvictOldest(100); n != 4 || r.Len() != 0 {
		t.Fatalf("evicted %d of 4, len %d", n, r.Len())
	}
	r.Insert(a)
	if r.Match(a) != 4 {
		t.Fatalf("after emptying, a holds %d, want 4", r.Match(a))
	}
}
