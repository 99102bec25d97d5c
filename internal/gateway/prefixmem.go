package gateway

import (
	"strconv"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
)

// prefixMemory is the gateway's own record of which replicas recently prefilled a prompt
// prefix (by affinity key): where that prefix is likely still in the KV cache. Bounded: the
// oldest keys are forgotten first. Not safe for concurrent use; the pool's lock guards it.
type prefixMemory struct {
	seen  map[uint64]map[string]time.Time
	order []uint64 // keys in first-seen order, a ring once full
	next  int
	limit int
}

// prefixFresh is how long a prefilled prefix is assumed to stay cached.
const prefixFresh = 10 * time.Minute

func newPrefixMemory(limit int) *prefixMemory {
	return &prefixMemory{seen: make(map[uint64]map[string]time.Time), limit: limit}
}

func (m *prefixMemory) note(key uint64, replica string, now time.Time) {
	if key == 0 {
		return
	}
	reps := m.seen[key]
	if reps == nil {
		if len(m.order) < m.limit {
			m.order = append(m.order, key)
		} else {
			delete(m.seen, m.order[m.next])
			m.order[m.next] = key
			m.next = (m.next + 1) % m.limit
		}
		reps = make(map[string]time.Time, 1)
		m.seen[key] = reps
	}
	reps[replica] = now
}

// cachedOn reports whether replica prefilled the prefix recently.
func (m *prefixMemory) cachedOn(key uint64, replica string, now time.Time) bool {
	at, ok := m.seen[key][replica]
	return ok && now.Sub(at) < prefixFresh
}

// affinityPrefix is the prompt prefix length that gives a request affinity (<= 0: none).
func (p *pool) affinityPrefix() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.affinityBytes
}

// notePrefix records that replica prefilled the prompt prefix of key.
func (p *pool) notePrefix(key uint64, replica string, now time.Time) {
	if key == 0 {
		return
	}
	p.mu.Lock()
	p.prefixes.note(key, replica, now)
	p.mu.Unlock()
}

// cachedPrefix is the prompt prefix, in bytes, that a replica none of a request's attempts
// ran on likely holds in cache (0: none does): under the cache-aware policy the longest
// prefix of blocks any such replica's record holds, else the affinity prefix when a
// replica recently prefilled it. A replica whose cache the canary distrusts holds nothing.
func (p *pool) cachedPrefix(key uint64, blocks []uint64, attempts []failover.AttemptInfo, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b.Limits.CacheAware && len(blocks) > 0 {
		longest := 0
		for _, r := range p.b.Replicas {
			if r.Prefix != nil && !r.NoAffinity && !failover.Tried(attempts, r.Name) {
				longest = max(longest, r.Prefix.Match(blocks))
			}
		}
		return longest * balance.PrefixBlockBytes
	}
	if key == 0 {
		return 0
	}
	for _, r := range p.b.Replicas {
		if !failover.Tried(attempts, r.Name) && !r.NoAffinity && p.prefixes.cachedOn(key, r.Name, now) {
			return p.affinityBytes
		}
	}
	return 0
}

// Bounds of a replica's prompt record (balance.PrefixRecord), in blocks of
// balance.PrefixBlockBytes. The record is sized at recordPerCacheByte times what the
// engine's KV cache holds at a generous cacheBytesPerToken of JSON a token: generously,
// because forgetting a conversation the engine still holds sends its next turn to a cold
// replica, while remembering one the engine has partly evicted only sends it back where
// the rest of its prefix is — what pinning each conversation to a replica does. Within
// minPrefixBlocks and maxPrefixBlocks (about 100 bytes of the gateway's memory a block);
// defaultPrefixBlocks when the engine does not say.
const (
	minPrefixBlocks     = 1 << 10
	maxPrefixBlocks     = 1 << 16
	defaultPrefixBlocks = 1 << 14
	cacheBytesPerToken  = 8
	recordPerCacheByte  = 8
)

// prefixCapacity is the record's capacity for an engine that reports its cache as
// vllm:cache_config_info does (num_gpu_blocks of block_size tokens); ok is false when it
// does not.
func prefixCapacity(cacheConfig map[string]string) (int, bool) {
	blocks, err1 := strconv.Atoi(cacheConfig["num_gpu_blocks"])
	size, err2 := strconv.Atoi(cacheConfig["block_size"])
	if err1 != nil || err2 != nil || blocks <= 0 || size <= 0 {
		return 0, false
	}
	return recordBlocksFor(int64(blocks) * int64(size)), true
}

// recordBlocksFor is the record's capacity for an engine whose KV cache holds tokens.
func recordBlocksFor(tokens int64) int {
	n := tokens * cacheBytesPerToken * recordPerCacheByte / balance.PrefixBlockBytes
	return int(min(max(n, minPrefixBlocks), maxPrefixBlocks))
}

// cacheTokens is the engine's KV cache in tokens, num_gpu_blocks × block_size of
// vllm:cache_config_info (0: not said).
func cacheTokens(cacheConfig map[string]string) int64 {
	blocks, err1 := strconv.Atoi(cacheConfig["num_gpu_blocks"])
	size, err2 := strconv.Atoi(cacheConfig["block_size"])
	if err1 != nil || err2 != nil || blocks <= 0 || size <= 0 {
		return 0
	}
	return int64(blocks) * int64(size)
}

// promptMembers are the members of a request that make its prompt, in the order engines'
// templates render them (tools first: templates put their descriptions in the system
// part).
var promptMembers = map[openai.Endpoint][]string{
	openai.Chat:        {"tools", "messages"},
	openai.Completions: {"prompt"},
	openai.Messages:    {"tools", "system", "messages"},
	openai.Responses:   {"tools", "instructions", "input"},
}

// promptBlockLimit is how many of a prompt's blocks are worth hashing for this pool: none
// unless it is cache-aware, else as many as its largest record holds — no record matches
// more of one prompt than its capacity (Insert keeps a prompt's first Capacity blocks), so
// the blocks past it would be hashed for nothing: most of a 32 MiB body's.
func (p *pool) promptBlockLimit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.b.Limits.CacheAware {
		return 0
	}
	n := 0
	for _, r := range p.b.Replicas {
		if r.Prefix != nil {
			n = max(n, r.Prefix.Capacity)
		}
	}
	return n
}

// promptBlocks is the prompt's first limit chained block hashes for the cache-aware policy,
// from the client's bytes of the members that make it (nil: an endpoint without a prompt,
// or limit 0).
func promptBlocks(ep openai.Endpoint, members openai.Members, limit int) []uint64 {
	names := promptMembers[ep]
	if len(names) == 0 || limit <= 0 {
		return nil
	}
	var parts [3][]byte
	n := 0
	for _, name := range names {
		if v, ok := members.Get(name); ok {
			parts[n] = v
			n++
		}
	}
	return balance.PrefixBlocks(limit, parts[:n]...)
}
