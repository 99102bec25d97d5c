package kvevents

import (
	"testing"
	"time"
)

// sglangHash is an SGLang block hash as published: a signed 64-bit integer.
func sglangHash(h int64) Hash { return IntHash(uint64(h)) }

// The prompt testdata/batch_sglang_store.msgpack stores, a page (one token) an event, and
// the hashes its earlier releases gave them (testdata/README.md).
var sglangPrompt = []struct {
	token uint32
	hash  int64
}{
	{151644, -8288966590863363035}, {8948, 5544995175031854046}, {198, 297711108423112674},
	{2610, 3420851446821270936}, {525, 9011537329882934731}, {264, -3731248534740295529},
}

const sglangRootHash = 5740354900026072187 // Python's hash(()): the root node's last page

func sglangStores(from, to int, parent int64) []Event {
	var out []Event
	for _, p := range sglangPrompt[from:to] {
		out = append(out, Event{Kind: Stored, Hashes: []Hash{sglangHash(p.hash)}, Parent: sglangHash(parent), Tokens: 1, BlockSize: 1})
		parent = p.hash
	}
	return out
}

func TestDecodeSGLangPagesOfOneToken(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_sglang_store.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, Batch{TS: 1765000000.25, DPRank: 0, Events: sglangStores(0, 6, sglangRootHash)})

	got, err = DecodeBatch(readFixture(t, "batch_sglang_split.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	var want []Event
	for _, p := range sglangPrompt {
		want = append(want, Event{Kind: Removed, Hashes: []Hash{sglangHash(p.hash)}})
	}
	want = append(want, sglangStores(0, 4, sglangRootHash)...)
	want = append(want, sglangStores(4, 6, sglangPrompt[3].hash)...)
	want = append(want,
		Event{Kind: Stored, Hashes: []Hash{sglangHash(4162563694452517125)}, Parent: sglangHash(sglangPrompt[3].hash), Tokens: 1, BlockSize: 1},
		Event{Kind: Stored, Hashes: []Hash{sglangHash(4004499321656434695)}, Parent: sglangHash(4162563694452517125), Tokens: 1, BlockSize: 1})
	sameEvents(t, got, Batch{TS: 1765000000.5, DPRank: 0, Events: want})
}

func TestDecodeSGLangMediumAndPages(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_sglang_medium.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := sglangHash(3275049765234721789), sglangHash(-4204536788265082578)
	sameEvents(t, got, Batch{TS: 1766000000.75, DPRank: 0, Events: []Event{
		{Kind: Stored, Hashes: []Hash{h1}, Tokens: 16, BlockSize: 16, Medium: "GPU"},
		{Kind: Stored, Hashes: []Hash{h2}, Parent: h1, Tokens: 16, BlockSize: 16, Medium: "GPU"},
		{Kind: Stored, Hashes: []Hash{h2}, Parent: h1, Tokens: 16, BlockSize: 16, Medium: "CPU_TIER1"},
		{Kind: Removed, Hashes: []Hash{h1}, Medium: "GPU"},
		{Kind: Cleared},
	}})
}

// A split of a radix node, as SGLang's earlier releases publish it (the node removed,
// its two halves stored again in the same batch), stores no new tokens: only the prompt's
// own new tokens count towards the ratio, and the engine holds what it held plus them.
func TestTrackerCountsAnSGLangSplitAsNothingNew(t *testing.T) {
	tr := NewTracker(256, 10*time.Second)
	for i, name := range []string{"batch_sglang_store.msgpack", "batch_sglang_split.msgpack"} {
		b, err := DecodeBatch(readFixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		tr.Receive(int64(i), b, t0, false)
	}
	if tr.Resident() != 8 {
		t.Errorf("resident %d, want 8 (six pages, two new)", tr.Resident())
	}
	if tr.winTokens != 8 {
		t.Errorf("stored tokens counted %d, want 8: six, then two new ones; the split's six again are none", tr.winTokens)
	}
}

// Only removals followed at once by stores of the same blocks, in order, are a split. An
// eviction of other blocks before a store, or of the same token's page elsewhere (its
// hash in those releases is the token's alone), leaves the store counted.
func TestTrackerCountsStoresAfterUnrelatedRemovals(t *testing.T) {
	p := sglangPrompt
	one := func(h int64) []Hash { return []Hash{sglangHash(h)} }
	cases := map[string]struct {
		events []Event
		want   int64
	}{
		"other blocks removed": {[]Event{
			{Kind: Removed, Hashes: one(77)}, {Kind: Removed, Hashes: one(78)},
			{Kind: Stored, Hashes: one(p[0].hash), Tokens: 1, BlockSize: 1},
		}, 1},
		"the run broken, the rest counted": {[]Event{
			{Kind: Removed, Hashes: one(p[0].hash)}, {Kind: Removed, Hashes: one(p[1].hash)},
			{Kind: Stored, Hashes: one(p[1].hash), Tokens: 1, BlockSize: 1},
			{Kind: Stored, Hashes: one(p[0].hash), Tokens: 1, BlockSize: 1},
		}, 2},
		"a store between removal runs": {[]Event{
			{Kind: Removed, Hashes: one(p[0].hash)},
			{Kind: Stored, Hashes: one(99), Tokens: 1, BlockSize: 1},
			{Kind: Removed, Hashes: one(p[1].hash)},
			{Kind: Stored, Hashes: one(p[0].hash), Tokens: 1, BlockSize: 1},
		}, 2},
		"the cache cleared between": {[]Event{
			{Kind: Removed, Hashes: one(p[0].hash)}, {Kind: Cleared},
			{Kind: Stored, Hashes: one(p[0].hash), Tokens: 1, BlockSize: 1},
		}, 1},
		"part of a store's blocks again (vLLM's many blocks a store)": {[]Event{
			{Kind: Removed, Hashes: []Hash{IntHash(1), IntHash(2)}},
			{Kind: Stored, Hashes: []Hash{IntHash(1), IntHash(2), IntHash(3), IntHash(4)}, Tokens: 64, BlockSize: 16},
		}, 32},
	}
	for name, c := range cases {
		tr := NewTracker(256, 10*time.Second)
		tr.Receive(0, Batch{Events: c.events}, t0, false)
		if tr.winTokens != c.want {
			t.Errorf("%s: stored tokens counted %d, want %d", name, tr.winTokens, c.want)
		}
	}
}
