package balance

import (
	"hash/fnv"
	"maps"
	"time"
)

// Limits are the pool's load limits.
type Limits struct {
	// MaxOutstanding bounds this gateway's attempts in flight on one replica (0: no bound).
	MaxOutstanding int
	// MaxQueue: a replica whose engine reports this many waiting requests gets no new work
	// (0: no bound). Reports older than StaleAfter are ignored.
	MaxQueue   int
	StaleAfter time.Duration
	// AffinityBound: prefix affinity keeps a request on its preferred replica only while
	// that replica's load is at most AffinityBound times the least load plus one, or at
	// most AffinitySlack more than the least load (bounded load, so affinity never piles
	// work on one replica). AffinityBound 0 disables affinity.
	AffinityBound float64
	// AffinitySlack is the load, in requests, by which the preferred replica may exceed
	// the least loaded whatever the ratio: a few more sequences in an engine's running
	// batch cost it far less than prefilling a long prefix again elsewhere (0: none).
	AffinitySlack int
	// CacheAware: a prompt goes to the replica whose record (Replica.Prefix) holds the
	// longest prefix of it, within AffinityBound, instead of to the one its first bytes
	// hash to.
	CacheAware bool
}

func (l Limits) full(r *Replica, now time.Time) bool {
	if c := l.Capacity(r); c > 0 && r.Outstanding >= c {
		return true
	}
	fresh := l.StaleAfter <= 0 || now.Sub(r.Load.At) <= l.StaleAfter
	return l.MaxQueue > 0 && fresh && !r.Load.At.IsZero() && r.Load.Waiting >= l.MaxQueue
}

// Capacity is how many of this gateway's attempts r takes at once: MaxOutstanding when
// configured, else the slots its engine reports (Replica.Slots), else 0, no bound.
func (l Limits) Capacity(r *Replica) int {
	if l.MaxOutstanding > 0 {
		return l.MaxOutstanding
	}
	return r.Slots
}

// Pool is the set of replicas serving one model.
type Pool struct {
	Model    string
	Replicas []*Replica
	// Cooldown is how long a dial failure keeps a replica out of rotation, and how long
	// its first ejection lasts (see AttemptFailed).
	Cooldown time.Duration
	// EjectAfter is the number of consecutive failed attempts that eject a replica
	// (0 or less: never).
	EjectAfter int
	Limits     Limits

	// scratch is PickPrompt's working room, reused from pick to pick: a pick runs on the
	// request's goroutine under the caller's lock, at the deepest point of a streaming
	// request's stack, where arrays in its frame would double the stack every open
	// stream keeps (docs/performance.md, "Memory per idle stream"); a slice made anew
	// would be an allocation per pick.
	scratch pickScratch
}

// pickScratch holds what PickPrompt collects: the available replicas, and under
// CacheAware the ones holding some of the prompt and those tied at its longest prefix.
type pickScratch struct {
	cands   []*Replica
	holders []holder
	tied    []*Replica
}

// Choice is the answer of Pick.
type Choice struct {
	Replica *Replica
	// Shed is true when replicas exist that could serve but all are at their load limits:
	// the caller answers 429 with Retry-After instead of queueing without bound.
	Shed bool
}

// Pick chooses the replica for an attempt. Among replicas that are available and not
// excluded, it keeps the lowest priority tier that has one (a higher tier serves only when
// every lower tier is down, full or excluded); within it, when affinityKey is not zero, the
// replica that rendezvous hashing prefers for that key while its load is within the bound,
// otherwise the least loaded.
func (p *Pool) Pick(now time.Time, exclude func(*Replica) bool, affinityKey uint64) Choice {
	return p.PickPrompt(now, exclude, affinityKey, nil)
}

// PickPrompt is Pick for a prompt cut into blocks (PrefixBlocks). Under CacheAware the
// preferred replica is the one whose record holds the longest prefix of the blocks (the
// least loaded among equals), kept while its load is within AffinityBound of the least
// loaded's, as prefix affinity is; a prompt no record holds any of goes to the least
// loaded. The blocks are not recorded here: the caller records them on the replica it
// sends the prompt to.
func (p *Pool) PickPrompt(now time.Time, exclude func(*Replica) bool, affinityKey uint64, blocks []uint64) Choice {
	sc := &p.scratch
	sc.reset()
	shed := false
	for _, r := range p.Replicas {
		if exclude != nil && exclude(r) {
			continue
		}
		switch r.StateAt(now, p.Limits) {
		case Healthy:
			sc.cands = append(sc.cands, r)
		case Overloaded:
			shed = true
		}
	}
	cands := sc.cands
	if len(cands) == 0 {
		return Choice{Shed: shed}
	}
	tier := cands[0].Priority
	for _, r := range cands {
		tier = min(tier, r.Priority)
	}
	var best, affine *Replica
	var affineWeight uint64
	cached := p.Limits.CacheAware && len(blocks) > 0
	tierSize := 0
	for _, r := range cands {
		if r.Priority != tier {
			continue
		}
		tierSize++
		if best == nil || r.score() < best.score() {
			best = r
		}
		if r.NoAffinity {
			continue // its cache is not trusted (the canary): never preferred for what it holds
		}
		if cached {
			if r.Prefix != nil {
				if m := r.Prefix.Match(blocks); m > 0 {
					sc.holders = append(sc.holders, holder{r, m})
				}
			}
			continue
		}
		if affinityKey != 0 {
			if w := rendezvous(affinityKey, r.Name); affine == nil || w > affineWeight {
				affine, affineWeight = r, w
			}
		}
	}
	if cached {
		return Choice{Replica: p.cachedPick(sc.holders, blocks, best, tierSize)}
	}
	if affine != nil && p.withinBound(affine, best, 0) {
		return Choice{Replica: affine}
	}
	return Choice{Replica: best}
}

// holder is a replica and how many of a prompt's first blocks its record holds.
type holder struct {
	r     *Replica
	match int
}

// withinBound reports whether r's load keeps it preferable to best, the least loaded:
// at most AffinityBound times best's load plus one, or at most AffinitySlack more than
// best's — plus extra requests for what of a prompt r alone holds
// (exclusiveBlocksPerRequest), when there is a slack at all. Never with AffinityBound 0.
func (p *Pool) withinBound(r, best *Replica, extra int) bool {
	l := p.Limits
	if l.AffinityBound <= 0 {
		return false
	}
	slack := l.AffinitySlack
	if slack > 0 {
		slack += extra
	}
	return float64(r.score()) <= l.AffinityBound*float64(best.score()+1) || r.score()-best.score() <= slack
}

// exclusiveBlocksPerRequest is how much of a prompt only the preferred replica holds (in
// blocks of PrefixBlockBytes: 4 KiB of JSON, some 800 tokens) that earns it one more
// request of AffinitySlack: sending the prompt elsewhere would prefill that much again,
// and cache it twice. A prefix others hold as well earns nothing: moving the prompt to one
// of them loses nothing. Chosen on the multiturn workload with eight system prompts
// (docs/performance.md): the load a conversation's turns may add before they move grows
// with what they would leave behind, and a system prompt one replica alone holds (8 KiB)
// is two requests' worth, so it is not copied to another replica for a moment's
// imbalance. At 8 blocks the hit rate held in every run and the balance did not (the
// busiest replica up to 1.5 times the mean).
const exclusiveBlocksPerRequest = 16

// maxFallbackExtra bounds the slack a replica holding the next longest prefix earns, when
// the longest's holder is beyond the bound, for what of the prompt it holds beyond best
// (one request a exclusiveBlocksPerRequest, as above): without it, a new conversation whose
// system prompt's holder was one request past the slack went to the least loaded, which
// held none of it, and the requests that prefilled their system prompt again there were
// the workload's slowest tenth. More than one request let the balance go (the busiest
// replica up to 1.49 times the mean); measured on the multiturn workload with eight system
// prompts (docs/performance.md).
const maxFallbackExtra = 1

// cachedPick is PickPrompt's choice under CacheAware, among holders (the tier's replicas
// holding some of blocks; tierSize replicas in all) and best, the tier's least loaded. The
// replica holding the longest prefix (preferredHolder among equals), while within the load
// bound, its slack grown by what of the prompt it alone holds (withinBound); when
// it is not, the replica within the bound holding the next longest prefix (the least
// loaded among equals; its slack grown by what it holds beyond best, by at most
// maxFallbackExtra), so that a prompt sent away from its longest match still
// goes where most of it is cached — a new conversation to another replica holding its
// system prompt — rather than to one that holds none of it; when none holding any of it is
// within the bound, or none holds any, best.
func (p *Pool) cachedPick(holders []holder, blocks []uint64, best *Replica, tierSize int) *Replica {
	longest := 0
	for _, h := range holders {
		longest = max(longest, h.match)
	}
	if longest == 0 {
		return best
	}
	sc := &p.scratch
	for _, h := range holders {
		if h.match == longest {
			sc.tied = append(sc.tied, h.r)
		}
	}
	tied := sc.tied
	pick := preferredHolder(tied, blocks[longest-1], len(tied) == tierSize)
	second := 0 // the longest prefix any other replica holds
	for _, h := range holders {
		if h.r != pick {
			second = max(second, h.match)
		}
	}
	if p.withinBound(pick, best, (longest-second)/exclusiveBlocksPerRequest) {
		return pick
	}
	bestMatch := 0 // what of the prompt best holds: going there prefills the rest
	for _, h := range holders {
		if h.r == best {
			bestMatch = h.match
		}
	}
	var next *holder
	for i := range holders {
		h := &holders[i]
		extra := min(maxFallbackExtra, max(0, h.match-bestMatch)/exclusiveBlocksPerRequest)
		if !p.withinBound(h.r, best, extra) {
			continue
		}
		if next == nil || h.match > next.match || (h.match == next.match && h.r.score() < next.r.score()) {
			next = h
		}
	}
	if next != nil {
		return next.r
	}
	return best
}

// preferredHolder chooses among the replicas that hold the same longest prefix of a
// prompt, last its last block held. When every replica of the tier holds it (a prefix all
// requests share, such as an application's system prompt), the least loaded: it is cached
// wherever the request goes. When only some do, the one rendezvous hashing prefers for
// that block, so that the requests sharing it keep to one replica, and to the others only
// when the load bound sends them there: a prefix spread over every replica by ties is
// cached nowhere for long once the caches are full.
func preferredHolder(tied []*Replica, last uint64, everywhere bool) *Replica {
	var pick *Replica
	var weight uint64
	for _, r := range tied {
		if everywhere {
			if pick == nil || r.score() < pick.score() {
				pick = r
			}
			continue
		}
		if w := rendezvous(last, r.Name); pick == nil || w > weight {
			pick, weight = r, w
		}
	}
	return pick
}

// rendezvous is the highest-random-weight hash of (key, replica): every gateway prefers the
// same replica for a key, and removing a replica moves only its own keys.
func rendezvous(key uint64, name string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(key >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(name))
	return h.Sum64()
}

// AffinityKey hashes the first n bytes of a prompt; prompts shorter than n have no affinity
// (0), since they have no long prefix worth keeping in one replica's cache.
func AffinityKey(prompt string, n int) uint64 {
	if n <= 0 || len(prompt) < n {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(prompt[:n]))
	if k := h.Sum64(); k != 0 {
		return k
	}
	return 1
}

// MarkDialFailed takes r out of rotation for the cooldown: the process is not listening.
func (p *Pool) MarkDialFailed(r *Replica, now time.Time, reason string) {
	r.deadUntil = now.Add(p.Cooldown)
	r.lastReason = reason
}

// MarkDead takes r out of rotation for d (an operator or orchestrator says it is gone).
func (p *Pool) MarkDead(r *Replica, now time.Time, d time.Duration, reason string) {
	r.deadUntil = now.Add(d)
	r.lastReason = reason
}

// MarkOverloaded keeps new work off r until until (an engine 429/503, with its Retry-After).
func (p *Pool) MarkOverloaded(r *Replica, until time.Time, reason string) {
	r.overloadedUntil = until
	r.lastReason = reason
}

// SetDraining starts or ends draining: no new work, running streams finish.
func (p *Pool) SetDraining(r *Replica, on bool, reason string) {
	r.draining = on
	r.lastReason = reason
	if on {
		return
	}
	r.deadUntil = time.Time{}
}

// ProbeResult records an active health probe. A success clears a dial-failure cooldown:
// the replica is back.
func (p *Pool) ProbeResult(r *Replica, ok bool, reason string) {
	r.probeFailed = !ok
	if ok {
		r.deadUntil = time.Time{}
		if !r.draining {
			r.lastReason = ""
		}
	} else {
		r.lastReason = reason
	}
}

// ReportLoad records what the engine says of its load.
func (p *Pool) ReportLoad(r *Replica, l Load) { r.Load = l }

// SetIncompatible keeps r out of the pool while reason is not empty (its engine's
// fingerprint differs from the configuration).
func (p *Pool) SetIncompatible(r *Replica, reason string) { r.incompatible = reason }

// Compatible reports whether a rerun may move from a to b: equal fingerprints.
func Compatible(a, b *Replica) bool { return maps.Equal(a.Fingerprint, b.Fingerprint) }

// Find returns the replica named name, or nil.
func (p *Pool) Find(name string) *Replica {
	for _, r := range p.Replicas {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Add puts a replica into the pool. A replica that joins a running pool waits for its first
// passing probe (Unhealthy until then) unless probed is true.
func (p *Pool) Add(r *Replica, probed bool) {
	r.probeFailed = !probed
	if !probed {
		r.lastReason = "joined; waiting for its first health probe"
	}
	p.Replicas = append(p.Replicas, r)
}

// Remove takes the named replica out of the pool and reports whether it was there. The
// caller drains it first (SetDraining) and removes it once nothing runs on it.
func (p *Pool) Remove(name string) bool {
	for i, r := range p.Replicas {
		if r.Name == name {
			p.Replicas = append(p.Replicas[:i], p.Replicas[i+1:]...)
			return true
		}
	}
	return false
}

// reset empties the scratch for a pick, its elements zeroed: a replica the pool has let
// go of is held until the next pick, no longer.
func (sc *pickScratch) reset() {
	clear(sc.cands)
	clear(sc.holders)
	clear(sc.tied)
	sc.cands, sc.holders, sc.tied = sc.cands[:0], sc.holders[:0], sc.tied[:0]
}
