package kvevents

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seq(from, n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

// arrayIntBatch is what testdata/batch_array_int.msgpack holds (see testdata/README.md).
var arrayIntBatch = Batch{TS: 1761816192.1347115, DPRank: 0, Events: []Event{
	{Kind: Stored, Hashes: []Hash{IntHash(4284880390408332321), IntHash(10213826896782787679)}, Tokens: 32,
		TokenIDs: seq(1000, 32), BlockSize: 16, Medium: "GPU"},
	{Kind: Stored, Hashes: []Hash{IntHash(3183184509886770661)}, Parent: IntHash(10213826896782787679), Tokens: 16,
		TokenIDs: seq(2000, 16), BlockSize: 16, Medium: "GPU"},
	{Kind: Removed, Hashes: []Hash{IntHash(4284880390408332321)}, Medium: "GPU"},
	{Kind: Cleared},
}}

func sameEvents(t *testing.T, got, want Batch) {
	t.Helper()
	if got.TS != want.TS || got.DPRank != want.DPRank || len(got.Events) != len(want.Events) {
		t.Fatalf("batch ts %v rank %d events %d, want ts %v rank %d events %d",
			got.TS, got.DPRank, len(got.Events), want.TS, want.DPRank, len(want.Events))
	}
	for i, g := range got.Events {
		w := want.Events[i]
		if g.Kind != w.Kind || !slices.Equal(g.Hashes, w.Hashes) || g.Parent != w.Parent || g.Tokens != w.Tokens ||
			g.BlockSize != w.BlockSize || g.Medium != w.Medium || g.HasGroup != w.HasGroup || g.Group != w.Group ||
			g.GroupKind != w.GroupKind {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestDecodePositionalIntHashes(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_array_int.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, arrayIntBatch)
	if n := got.Events[0].StoredTokens(); n != 32 {
		t.Errorf("stored tokens %d, want 32", n)
	}
}

func TestEncodeIsByteForByteThePositionalFixture(t *testing.T) {
	got, err := EncodeBatch(arrayIntBatch)
	if err != nil {
		t.Fatal(err)
	}
	if want := readFixture(t, "batch_array_int.msgpack"); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
}

func TestDecodeNamedEvents(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_map_events.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	h := IntHash(15760518052499183552)
	sameEvents(t, got, Batch{TS: 1789095808.8378847, DPRank: 0, Events: []Event{
		{Kind: Stored, Hashes: []Hash{h}, Tokens: 16, BlockSize: 16, Medium: "GPU", HasGroup: true, GroupKind: "full_attention"},
		{Kind: Removed, Hashes: []Hash{h}, Medium: "GPU", HasGroup: true},
		{Kind: Cleared},
	}})
}

// hybridBatch is what testdata/batch_map_hybrid.msgpack holds.
var hybridBatch = Batch{TS: 1790100000.5, DPRank: 0, Events: []Event{
	{Kind: Stored, Hashes: []Hash{IntHash(11469530486218553410), IntHash(3140237744021387729)}, Tokens: 32, BlockSize: 16,
		Medium: "GPU", HasGroup: true, Group: 0, GroupKind: "full_attention"},
	{Kind: Stored, Hashes: []Hash{IntHash(11469530486218553410), IntHash(3140237744021387729)}, Tokens: 32, BlockSize: 16,
		Medium: "GPU", HasGroup: true, Group: 1, GroupKind: "sliding_window"},
	{Kind: Removed, Hashes: []Hash{IntHash(8203947721155332071)}, Medium: "GPU", HasGroup: true, Group: 1},
}}

func TestDecodeHybridModelGroups(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_map_hybrid.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, hybridBatch)
}

func TestDecodeNamedBatch(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_map_map.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, Batch{TS: 1790000000.25, DPRank: 0, Events: []Event{
		{Kind: Stored, Hashes: []Hash{IntHash(7)}, Tokens: 16, BlockSize: 16, Medium: "GPU"},
	}})
}

func TestDecodeByteHashes(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_array_bytes.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := sha256.Sum256([]byte("block-1")), sha256.Sum256([]byte("block-2"))
	sameEvents(t, got, Batch{TS: 1761816200.5, DPRank: 0, Events: []Event{
		{Kind: Stored, Hashes: []Hash{Hash(h1[:]), Hash(h2[:])}, Tokens: 32, BlockSize: 16, Medium: "GPU"},
		{Kind: Removed, Hashes: []Hash{Hash(h2[:])}, Medium: "GPU"},
	}})
}

func TestDecodeSignedHashesWithoutMediumOrRank(t *testing.T) {
	got, err := DecodeBatch(readFixture(t, "batch_array_v09.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	neg := int64(-6917529027641081856)
	sameEvents(t, got, Batch{TS: 1748000000, DPRank: -1, Events: []Event{
		{Kind: Stored, Hashes: []Hash{IntHash(uint64(neg)), IntHash(42)}, Tokens: 32, BlockSize: 16},
		{Kind: Removed, Hashes: []Hash{IntHash(42)}},
	}})
}

func TestDecodeRefusesWhatItCannotAccountFor(t *testing.T) {
	whole := readFixture(t, "batch_array_int.msgpack")
	unknown := bytes.Replace(whole, []byte("BlockRemoved"), []byte("BlockMovedXX"), 1)
	for name, p := range map[string][]byte{
		"truncated":   whole[:len(whole)-3],
		"trailing":    append(slices.Clone(whole), 0xc0),
		"unknown tag": unknown,
		"not a batch": {0xa3, 'a', 'b', 'c'},
		"empty":       nil,
	} {
		if _, err := DecodeBatch(p); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}
