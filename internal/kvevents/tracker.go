package kvevents

import (
	"fmt"
	"time"
)

// State is how far the gateway trusts a replica's KV events.
type State uint8

const (
	// Off: the replica publishes no events the gateway reads (none configured).
	Off State = iota
	// Live: every batch since the last resync arrived, in order: the record is sized and
	// aged by the engine's own cache.
	Live
	// Degraded: events were lost, are late, or the subscription is down (or no batch came
	// yet): the record is sized as without events, generously.
	Degraded
)

var stateNames = [...]string{Off: "off", Live: "live", Degraded: "degraded"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// States lists every state, for a metric that reports each.
var States = []State{Off, Live, Degraded}

// The learned ratio of record bytes to engine tokens: estimated over windows of at least
// ratioWindowTokens stored tokens, each folded in with weight ratioWeight, and held within
// [minBytesPerToken, maxBytesPerToken] (a prompt's JSON is rarely below two bytes a token
// and never near 64).
const (
	ratioWindowTokens = 2048
	ratioWeight       = 0.3
	minBytesPerToken  = 0.5
	maxBytesPerToken  = 64
)

// Tracker keeps what one replica's KV events say: the sequence of batches (a gap is events
// lost), the engine's resident blocks, and the learned bytes of the gateway's prompt record
// per token of the engine's cache, and from these what the record should do (Effects). Not
// safe for concurrent use: the pool's lock guards it.
type Tracker struct {
	// RecordBlockBytes is the size of a block of the gateway's record (bytes).
	RecordBlockBytes int
	// LateAfter: requests were sent that brought new prompt blocks, and no batch came for
	// this long: the events are late, and no longer trusted until the next batch.
	LateAfter time.Duration

	state  State
	reason string

	lastSeq int64
	haveSeq bool
	// joining: the first batch had a number above 0 and the batches before it are being
	// asked again; those the engine no longer keeps are not a loss (nothing was missed
	// while subscribed).
	joining bool

	resident int // GPU blocks stored and not removed since the last resync
	// group is the KV cache group whose events are counted (follows); -1 until a hybrid
	// model's first full-attention store names it.
	group int

	bytesPerToken       float64
	learned             bool
	winBytes, winTokens int64
	awaitingSince       time.Time
	lost                bool  // events were lost: untrusted until a resync or washTokens reach the cache's size
	washTokens          int64 // tokens stored since events were lost
	cacheTokens         int64 // the engine's cache in tokens (num_gpu_blocks × block_size), 0: unknown
	restored            restoredBlocks
}

// NewTracker returns a tracker waiting for its first batch (Degraded).
func NewTracker(recordBlockBytes int, lateAfter time.Duration) *Tracker {
	return &Tracker{RecordBlockBytes: recordBlockBytes, LateAfter: lateAfter, state: Degraded,
		reason: "no event batch received yet", group: -1}
}

// State is the tracker's state and why (empty when live).
func (t *Tracker) State() (State, string) { return t.state, t.reason }

// Resident is the number of blocks the engine holds in its GPU prefix cache, as its events
// since the last resync say (blocks stored before the subscription began are not known).
func (t *Tracker) Resident() int { return t.resident }

// BytesPerToken is the learned ratio, and whether one was learned.
func (t *Tracker) BytesPerToken() (float64, bool) { return t.bytesPerToken, t.learned }

// SetCacheTokens tells the tracker the engine's cache size in tokens (num_gpu_blocks ×
// block_size), which decides how much must be stored after lost events before the
// record is trusted again.
func (t *Tracker) SetCacheTokens(n int64) { t.cacheTokens = n }

// Precise reports whether the record is to be sized and aged by the events: they are live
// and a ratio was learned.
func (t *Tracker) Precise() bool { return t.state == Live && t.learned }

// Capacity is the record's capacity, in record blocks, for an engine cache of cacheTokens
// tokens, when Precise: the cache's tokens at the record's bytes a token (recordBytes). ok
// is false otherwise (the caller sizes the record as without events).
func (t *Tracker) Capacity(cacheTokens int64) (blocks int, ok bool) {
	if !t.Precise() || cacheTokens <= 0 {
		return 0, false
	}
	return max(int(float64(cacheTokens)*t.recordBytes()/float64(t.RecordBlockBytes)), 1), true
}

// ratioHeadroom is how much more the record holds than the engine's cache at the learned
// ratio. The ratio is learned from what is new on both sides, and errs low: blocks the
// engine evicted and stores again, where the record still holds them, count tokens for
// which the gateway recorded no new bytes (and the smaller the record, the more often). A
// record sized at the learned ratio itself found 0.50–0.80 of the multiturn workload's
// prompts cached, against 0.81–0.85 at twice it (docs/performance.md).
const ratioHeadroom = 2

// recordBytes is the record's bytes for a token of the engine's cache, when sizing it: the
// learned ratio with its headroom.
func (t *Tracker) recordBytes() float64 { return ratioHeadroom * t.bytesPerToken }

// Effects is what a batch asks of the replica's record.
type Effects struct {
	// Clear: the engine's cache was emptied (AllBlocksCleared, or a restarted engine).
	Clear bool
	// ReplayFrom >= 0: events are missing from this sequence number on; the batch was not
	// applied: ask the replay socket for them, then pass the batch again with final set.
	ReplayFrom int64
	// Changed: the state changed (log it).
	Changed bool
}

// Receive takes batch seq, received on the subscription at now. A batch that follows the
// last one is applied. One after a gap is not, unless final (the replay socket was asked
// already): Effects.ReplayFrom says where the gap begins. With final, a gap that is still
// there is events lost: the tracker degrades until the engine has stored a whole cache's
// worth of tokens since (what was missed has then left both the cache and the record; an
// engine whose cache size is not known: until a resync). The first batch of a subscription,
// when above 0, asks for the batches before it too; those the engine no longer keeps are
// not a loss.
// A sequence number at or below the last one is a restarted engine (vLLM numbers its
// batches from 0 in each process): its cache is new and empty, the record is cleared —
// unless final, when the replay has sent and applied that batch already.
func (t *Tracker) Receive(seq int64, b Batch, now time.Time, final bool) Effects {
	fx := Effects{ReplayFrom: -1}
	if final && t.haveSeq && seq <= t.lastSeq {
		return fx // the replay sent this batch too, and it was applied then
	}
	if !t.haveSeq && seq > 0 && !final {
		// The subscription began after the engine had published: what it stored before is
		// in the batches before this one, which the replay socket may still keep.
		t.haveSeq, t.lastSeq, t.joining = true, -1, true
		fx.ReplayFrom = 0
		return fx
	}
	if t.haveSeq && seq <= t.lastSeq {
		fx.Clear = true
		t.resync()
		t.lastSeq = -1 // the new process's batches start at 0
	}
	if t.haveSeq && seq > t.lastSeq+1 {
		switch {
		case !final:
			fx.ReplayFrom = t.lastSeq + 1
			return fx
		case !t.joining:
			fx.Changed = t.lose(fmt.Sprintf("batches %d to %d are lost", t.lastSeq+1, seq-1))
		}
	}
	t.joining = false
	t.lastSeq, t.haveSeq = seq, true
	t.awaitingSince = time.Time{}
	fx = t.apply(b, fx)
	if t.lost && t.cacheTokens > 0 && t.washTokens >= t.cacheTokens {
		t.lost = false
	}
	if t.state != Live && !t.lost {
		t.state, t.reason, t.washTokens = Live, "", 0
		fx.Changed = true
	}
	return fx
}

// Replayed takes a batch the replay socket sent: applied if it is the next one, ignored
// otherwise (one already applied, or past a gap the replay did not fill).
func (t *Tracker) Replayed(seq int64, b Batch) Effects {
	if t.joining && seq > 0 && t.lastSeq == -1 {
		// The oldest batch the engine still keeps: the start of what can be known.
		t.lastSeq = seq - 1
	}
	if !t.haveSeq || seq != t.lastSeq+1 {
		return Effects{ReplayFrom: -1}
	}
	t.lastSeq = seq
	return t.apply(b, Effects{ReplayFrom: -1})
}

// LastSeq is the sequence number of the last batch applied (-1: none).
func (t *Tracker) LastSeq() int64 {
	if !t.haveSeq {
		return -1
	}
	return t.lastSeq
}

func (t *Tracker) apply(b Batch, fx Effects) Effects {
	t.restored.reset()
	for _, e := range b.Events {
		if e.Medium != "" && e.Medium != "GPU" {
			continue // a connector's other tier (CPU, disk): not the cache a request hits first
		}
		if !t.follows(e) {
			continue
		}
		switch e.Kind {
		case Stored:
			t.resident += len(e.Hashes)
			n := int64(e.StoredTokens() - t.restored.storedAgain(e))
			t.winTokens += n
			t.washTokens += n
		case Removed:
			t.restored.removed(e.Hashes)
			// Counted, not followed: the record cannot tell which of its blocks the engine
			// removed, and removals are mostly of blocks it never held — answers, other
			// clients' prompts, another placement's — so evicting as much of the record
			// as the engine removed emptied it of what the engine still held (hit rate
			// 0.55–0.77 after other traffic, against 0.82–0.85; docs/performance.md). The
			// record ages by its own capacity, sized by the engine's cache.
			t.resident = max(t.resident-len(e.Hashes), 0)
		case Cleared:
			fx.Clear = true
			t.resync()
			t.restored.reset() // what is stored after it is new, whatever was removed before
		}
	}
	t.learn()
	return fx
}

// follows reports whether e is of the cache group whose blocks the tracker counts. An
// engine that names no groups has one. A hybrid model's engine stores, and publishes, the
// same tokens once in each of its groups (vLLM's group_idx: full attention, sliding window,
// linear attention layers), which counted together would make every token count as two
// or more: only the first full-attention group that stores blocks is counted, the one a
// prompt's prefix is found in (a sliding window keeps only a prompt's last tokens). A
// model without full attention names none, and the tracker learns no ratio: its record
// stays sized as without events.
func (t *Tracker) follows(e Event) bool {
	if !e.HasGroup {
		return true
	}
	if t.group < 0 && e.Kind == Stored && (e.GroupKind == "" || e.GroupKind == "full_attention") {
		t.group = e.Group
	}
	return e.Group == t.group
}

// resync forgets the engine's cache: it was emptied.
func (t *Tracker) resync() {
	t.resident = 0
	t.lost = false // an emptied cache holds nothing that was missed
}

func (t *Tracker) learn() {
	if t.winTokens < ratioWindowTokens {
		return
	}
	if t.winBytes == 0 {
		// The engine stored a window's worth of other clients' prompts while this gateway
		// recorded nothing new: that says nothing of this gateway's bytes a token, and
		// learned it would shrink the record towards nothing just before its own
		// traffic comes back.
		t.winTokens = 0
		return
	}
	r := float64(t.winBytes) / float64(t.winTokens)
	r = min(max(r, minBytesPerToken), maxBytesPerToken)
	if t.learned {
		r = ratioWeight*r + (1-ratioWeight)*t.bytesPerToken
	}
	t.bytesPerToken, t.learned = r, true
	t.winBytes, t.winTokens = 0, 0
}

// lose degrades after lost events; it reports whether the state changed.
func (t *Tracker) lose(why string) bool {
	t.washTokens = 0
	t.lost = true
	changed := t.state != Degraded || t.reason != why
	t.state, t.reason = Degraded, why
	return changed
}

// Recorded tells the tracker that the gateway recorded a prompt on the replica at now:
// newBytes of it were new to the record (the engine will store their tokens).
func (t *Tracker) Recorded(newBytes int, now time.Time) {
	t.winBytes += int64(newBytes)
	if newBytes > 0 && t.awaitingSince.IsZero() {
		t.awaitingSince = now
	}
}

// Check degrades a live tracker whose events are late at now: requests that brought new
// blocks were sent LateAfter ago or more, and no batch came since. It reports whether the
// state changed. The next batch, if it follows the last one, makes it live again.
func (t *Tracker) Check(now time.Time) bool {
	if t.state != Live || t.LateAfter <= 0 || t.awaitingSince.IsZero() || now.Sub(t.awaitingSince) < t.LateAfter {
		return false
	}
	t.state = Degraded
	t.reason = fmt.Sprintf("no event batch for %s while requests were sent", now.Sub(t.awaitingSince).Round(time.Millisecond))
	return true
}

// Down degrades the tracker: the subscription is down (why). It reports whether the state
// changed.
func (t *Tracker) Down(why string) bool {
	changed := t.state != Degraded || t.reason != why
	t.state, t.reason = Degraded, why
	return changed
}
