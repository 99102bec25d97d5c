package kvevents

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func stored(blocks, blockSize int) Batch {
	hs := make([]Hash, blocks)
	for i := range hs {
		hs[i] = IntHash(uint64(i + 1))
	}
	return Batch{Events: []Event{{Kind: Stored, Hashes: hs, Tokens: blocks * blockSize, BlockSize: blockSize, Medium: "GPU"}}}
}

func removed(blocks int) Batch {
	return Batch{Events: []Event{{Kind: Removed, Hashes: make([]Hash, blocks), Medium: "GPU"}}}
}

// learned returns a live tracker that learned 8 bytes a token: 2,048 tokens stored for
// 16 KiB recorded.
func learned(t *testing.T) *Tracker {
	t.Helper()
	tr := NewTracker(256, 10*time.Second)
	tr.SetCacheTokens(9600)
	tr.Recorded(2048*8, t0)
	tr.Receive(0, stored(128, 16), t0, false)
	if bpt, ok := tr.BytesPerToken(); !ok || bpt != 8 {
		t.Fatalf("bytes a token %v (learned %v), want 8", bpt, ok)
	}
	if st, why := tr.State(); st != Live {
		t.Fatalf("state %s (%s), want live", st, why)
	}
	return tr
}

func TestTrackerSizesTheRecordOnceItLearnedTheRatio(t *testing.T) {
	tr := NewTracker(256, 10*time.Second)
	if st, _ := tr.State(); st != Degraded {
		t.Fatalf("before any batch: %s, want degraded", st)
	}
	tr.Recorded(1000, t0)
	tr.Receive(0, stored(4, 16), t0, false)
	if st, _ := tr.State(); st != Live {
		t.Fatalf("after the first batch: %s, want live", st)
	}
	if _, ok := tr.Capacity(9600); ok {
		t.Fatal("a capacity before a ratio was learned")
	}
	tr = learned(t)
	// 9,600 tokens at 8 bytes learned, counted with the headroom at 16: 600 blocks of 256.
	if n, ok := tr.Capacity(9600); !ok || n != 9600*2*8/256 {
		t.Fatalf("capacity %d (%v), want %d", n, ok, 9600*2*8/256)
	}
	if tr.Resident() != 128 {
		t.Fatalf("resident %d, want 128", tr.Resident())
	}
	// The next window folds in with weight 0.3: 0.3·2 + 0.7·8.
	tr.Recorded(2048*2, t0)
	tr.Receive(1, stored(128, 16), t0, false)
	if bpt, _ := tr.BytesPerToken(); bpt < 6.19 || bpt > 6.21 {
		t.Fatalf("bytes a token %v, want 6.2", bpt)
	}
}

// The engine's removals are counted (its resident blocks), and change nothing else: the
// record cannot tell which of its blocks they were, and ages by its own capacity.
func TestTrackerCountsRemovalsAndLeavesTheRecordAlone(t *testing.T) {
	tr := learned(t) // 128 blocks resident
	before, _ := tr.Capacity(9600)
	if fx := tr.Receive(1, removed(4), t0, false); fx.Clear || fx.Changed || fx.ReplayFrom >= 0 {
		t.Fatalf("removals asked %+v of the record, want nothing", fx)
	}
	after, _ := tr.Capacity(9600)
	if tr.Resident() != 124 || after != before {
		t.Fatalf("resident %d, capacity %d → %d; want 124, unchanged", tr.Resident(), before, after)
	}
	// Another tier's removals are not the GPU cache's.
	cpu := Batch{Events: []Event{{Kind: Removed, Hashes: make([]Hash, 4), Medium: "CPU"}}}
	tr.Receive(2, cpu, t0, false)
	if tr.Resident() != 124 {
		t.Fatalf("resident %d after CPU removals, want 124", tr.Resident())
	}
}

func TestTrackerAsksForAReplayAndDegradesWhenItCannotFillTheGap(t *testing.T) {
	tr := learned(t)
	fx := tr.Receive(4, stored(1, 16), t0, false)
	if fx.ReplayFrom != 1 || tr.LastSeq() != 0 {
		t.Fatalf("replay from %d, last %d; want 1, 0", fx.ReplayFrom, tr.LastSeq())
	}
	// The replay fills the gap: nothing was lost.
	for seq := int64(1); seq <= 3; seq++ {
		tr.Replayed(seq, stored(1, 16))
	}
	tr.Replayed(2, stored(1, 16)) // a batch applied already is ignored
	tr.Replayed(4, stored(1, 16)) // the replay sends the held batch too (the engine kept it)
	if fx := tr.Receive(4, stored(1, 16), t0, true); fx.Changed || fx.Clear {
		t.Fatalf("after a filled gap: %+v, want nothing more", fx)
	}
	if st, _ := tr.State(); st != Live || tr.Resident() != 132 {
		t.Fatalf("state %s resident %d, want live 132", st, tr.Resident())
	}
	// A gap the replay cannot fill: events lost.
	tr.Receive(9, stored(1, 16), t0, false)
	fx = tr.Receive(9, stored(1, 16), t0, true)
	st, why := tr.State()
	if !fx.Changed || st != Degraded || !strings.Contains(why, "batches 5 to 8 are lost") {
		t.Fatalf("state %s (%s) changed %v, want degraded for batches 5 to 8", st, why, fx.Changed)
	}
	if _, ok := tr.Capacity(9600); ok {
		t.Fatal("a precise capacity while degraded")
	}
	tr.Receive(10, removed(4), t0, false)
	// Live again once a whole cache's worth (9,600 tokens) was stored since, the batch
	// after the gap included.
	tr.Receive(11, stored(598, 16), t0, false)
	if st, _ := tr.State(); st != Degraded {
		t.Fatalf("live after %d tokens of 9600", 599*16)
	}
	if fx := tr.Receive(12, stored(1, 16), t0, false); !fx.Changed {
		t.Fatal("no change when live again")
	}
	if st, _ := tr.State(); st != Live {
		t.Fatalf("state %s after a whole cache was stored, want live", st)
	}
}

func TestTrackerClearsOnAllBlocksClearedAndOnARestartedEngine(t *testing.T) {
	tr := learned(t)
	tr.Receive(1, stored(10, 16), t0, false)
	tr.Receive(2, Batch{Events: []Event{{Kind: Stored, Hashes: []Hash{"a"}, BlockSize: 16}, {Kind: Cleared}}}, t0, false)
	fx := tr.Receive(3, Batch{Events: []Event{{Kind: Cleared}}}, t0, false)
	if !fx.Clear || tr.Resident() != 0 {
		t.Fatalf("clear %v resident %d, want a clear and 0", fx.Clear, tr.Resident())
	}
	// A lost gap then AllBlocksCleared: an emptied cache holds nothing that was missed.
	tr.Receive(8, stored(1, 16), t0, true)
	if st, _ := tr.State(); st != Degraded {
		t.Fatal("not degraded after a lost gap")
	}
	if fx := tr.Receive(9, Batch{Events: []Event{{Kind: Cleared}}}, t0, false); !fx.Clear || !fx.Changed {
		t.Fatalf("AllBlocksCleared: %+v, want a clear and a change", fx)
	}
	if st, _ := tr.State(); st != Live {
		t.Fatalf("state %s after AllBlocksCleared, want live", st)
	}
	// The engine restarted: its batches count from 0 again.
	tr.Receive(10, stored(5, 16), t0, false)
	fx = tr.Receive(0, stored(2, 16), t0, false)
	if !fx.Clear || fx.ReplayFrom != -1 || tr.Resident() != 2 || tr.LastSeq() != 0 {
		t.Fatalf("restart: %+v resident %d last %d, want a clear, resident 2, last 0", fx, tr.Resident(), tr.LastSeq())
	}
	// Restarted again, its first batches missed: replay them from 0.
	for seq := int64(1); seq <= 5; seq++ {
		tr.Receive(seq, stored(1, 16), t0, false)
	}
	fx = tr.Receive(2, stored(1, 16), t0, false)
	if !fx.Clear || fx.ReplayFrom != 0 {
		t.Fatalf("restart with batches missed: %+v, want a clear and a replay from 0", fx)
	}
}

func TestTrackerDegradesWhenEventsAreLateAndRecoversWithTheNextBatch(t *testing.T) {
	tr := learned(t)
	tr.Recorded(0, t0) // nothing new: the engine may store nothing
	if tr.Check(t0.Add(time.Minute)) {
		t.Fatal("late although no new block was sent")
	}
	tr.Recorded(512, t0)
	tr.Recorded(512, t0.Add(5*time.Second))
	if tr.Check(t0.Add(9 * time.Second)) {
		t.Fatal("late before LateAfter")
	}
	if !tr.Check(t0.Add(10 * time.Second)) {
		t.Fatal("not late after LateAfter")
	}
	if st, why := tr.State(); st != Degraded || !strings.Contains(why, "no event batch for 10s") {
		t.Fatalf("state %s (%s), want degraded, late", st, why)
	}
	if fx := tr.Receive(1, stored(1, 16), t0.Add(11*time.Second), false); !fx.Changed {
		t.Fatal("no change when the next batch came")
	}
	if st, _ := tr.State(); st != Live {
		t.Fatalf("state %s, want live", st)
	}
	if tr.Down("subscription: connection reset") {
		if st, why := tr.State(); st != Degraded || why != "subscription: connection reset" {
			t.Fatalf("state %s (%s)", st, why)
		}
	} else {
		t.Fatal("Down did not change the state")
	}
}

func TestTrackerJoiningLateAsksForWhatCameBefore(t *testing.T) {
	tr := NewTracker(256, time.Second)
	if fx := tr.Receive(7, stored(1, 16), t0, false); fx.ReplayFrom != 0 {
		t.Fatalf("first batch 7: replay from %d, want 0", fx.ReplayFrom)
	}
	// The engine keeps batches from 3 on only: what came before is not known, and not lost.
	for seq := int64(3); seq < 7; seq++ {
		tr.Replayed(seq, stored(2, 16))
	}
	fx := tr.Receive(7, stored(1, 16), t0, true)
	if st, why := tr.State(); st != Live || tr.Resident() != 9 || fx.Clear {
		t.Fatalf("state %s (%s), resident %d, clear %v; want live, 9, no clear", st, why, tr.Resident(), fx.Clear)
	}
	// Joined, a later gap is a loss.
	tr.Receive(9, stored(1, 16), t0, true)
	if st, _ := tr.State(); st != Degraded {
		t.Fatal("a gap after joining did not degrade")
	}
}

// A window of tokens stored while this gateway recorded nothing new (other clients' prompts)
// teaches nothing: before a ratio is learned it learns none, after it keeps the one it had.
func TestTrackerLearnsNothingFromAWindowOfOthersTraffic(t *testing.T) {
	tr := NewTracker(256, 10*time.Second)
	tr.SetCacheTokens(9600)
	tr.Receive(0, stored(128, 16), t0, false) // 2,048 tokens, no bytes recorded
	if _, ok := tr.BytesPerToken(); ok {
		t.Fatal("a ratio learned from a window with no bytes recorded")
	}
	if _, ok := tr.Capacity(9600); ok {
		t.Fatal("the record sized by events with no ratio learned")
	}
	// The next window is this gateway's own: 8 bytes a token, not diluted by the one before.
	tr.Recorded(2048*8, t0)
	tr.Receive(1, stored(128, 16), t0, false)
	if bpt, ok := tr.BytesPerToken(); !ok || bpt != 8 {
		t.Fatalf("bytes a token %v (learned %v), want 8", bpt, ok)
	}
	tr.Receive(2, stored(128, 16), t0, false)
	if bpt, _ := tr.BytesPerToken(); bpt != 8 {
		t.Fatalf("bytes a token %v after a window of others' traffic, want 8 kept", bpt)
	}
}

// A hybrid model's engine publishes the same tokens once in each KV cache group: the
// tracker counts the first full-attention group's alone, so that the ratio is of the
// tokens a prompt brought and not of them times the groups, and the sliding window's
// evictions of older blocks leave what the full-attention group still holds.
func TestTrackerCountsOneCacheGroupOfAHybridModel(t *testing.T) {
	tr := NewTracker(256, 10*time.Second)
	tr.SetCacheTokens(9600)
	tr.Recorded(32*8, t0)
	tr.Receive(0, hybridBatch, t0, false) // 2 blocks in each group, a sliding-window removal
	if tr.Resident() != 2 {
		t.Fatalf("resident %d, want the full-attention group's 2", tr.Resident())
	}
	inGroup := func(b Batch, group int, kind string) Event {
		e := b.Events[0]
		e.HasGroup, e.Group, e.GroupKind = true, group, kind
		return e
	}
	// 2,048 more tokens stored in each of the two groups for 16 KiB more recorded.
	tr.Recorded(2048*8, t0)
	tr.Receive(1, Batch{Events: []Event{inGroup(stored(128, 16), 0, "full_attention"),
		inGroup(stored(128, 16), 1, "sliding_window")}}, t0, false)
	if bpt, ok := tr.BytesPerToken(); !ok || bpt != 8 {
		t.Fatalf("bytes a token %v (learned %v), want 8: each token counted once", bpt, ok)
	}
	tr.Receive(2, Batch{Events: []Event{inGroup(removed(3), 1, ""), inGroup(removed(1), 0, "")}}, t0, false)
	if tr.Resident() != 129 {
		t.Fatalf("resident %d, want 129: the full-attention group's removal alone counted", tr.Resident())
	}
}
