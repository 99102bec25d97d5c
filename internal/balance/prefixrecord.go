package balance

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// PrefixBlockBytes is the size of a prompt block the cache-aware policy counts in: about
// sixty tokens, four of vLLM's blocks of sixteen.
const PrefixBlockBytes = 256

// PrefixBlocks cuts a prompt, given as the raw bytes of the request members that make it
// (in the order the engine's template renders them), into full blocks of PrefixBlockBytes
// and returns each block's hash chained over every block before it, as vLLM chains its KV
// blocks: a block matches only under the same prefix. The last, partial block is left out:
// an engine never reuses a block it has not filled. At most maxBlocks are returned
// (maxBlocks <= 0: all).
//
// The bytes are the client's JSON, not the engine's tokens: two requests that share a
// prefix of their JSON share the rendered prompt up to there, so a match is never claimed
// where the engine would find none; a client that writes the same conversation differently
// only loses the match.
func PrefixBlocks(maxBlocks int, parts ...[]byte) []uint64 {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	n := total / PrefixBlockBytes
	if maxBlocks > 0 {
		n = min(n, maxBlocks)
	}
	if n == 0 {
		return nil
	}
	out := make([]uint64, 0, n)
	var prev uint64
	var block [PrefixBlockBytes]byte
	fill := 0
	for _, p := range parts {
		for len(p) > 0 && len(out) < n {
			if fill == 0 && len(p) >= PrefixBlockBytes {
				prev = chainBlock(prev, p[:PrefixBlockBytes])
				out = append(out, prev)
				p = p[PrefixBlockBytes:]
				continue
			}
			c := copy(block[fill:], p)
			fill += c
			p = p[c:]
			if fill == PrefixBlockBytes {
				prev = chainBlock(prev, block[:])
				out = append(out, prev)
				fill = 0
			}
		}
	}
	return out
}

// chainBlock is the hash of block b under the prefix whose last block hashed to prev:
// the block hashed whole, then the two hashes together. Two one-shot hashes cost half
// what a streaming digest of prev and b does (its buffering and its state's reset), on
// a path that hashes every 256 bytes of a long prompt before the request is placed.
func chainBlock(prev uint64, b []byte) uint64 {
	var pair [16]byte
	binary.LittleEndian.PutUint64(pair[:8], prev)
	binary.LittleEndian.PutUint64(pair[8:], xxhash.Sum64(b))
	return xxhash.Sum64(pair[:])
}

// PrefixRecord is the gateway's approximate record of the prompt blocks one replica was
// sent, bounded to what its KV cache can hold (Capacity blocks) and aged out least
// recently used first, as the engine evicts. Blocks of one prompt are used from its last to
// its first, so the record drops a prompt's tail before its head, as vLLM frees a
// request's blocks tail first: what is kept of a prompt is always a prefix of it, which
// Match relies on. Not safe for concurrent use; the pool's lock guards it.
//
// The recency list is kept in a slice, linked by index, with a free list: recording a
// long prompt allocates nothing per block (it runs under the pool's lock, on every
// request).
type PrefixRecord struct {
	// Capacity is the most blocks kept (at least 1).
	Capacity int

	index map[uint64]int32 // block hash → its node
	nodes []prefixNode
	// head is the least recently used node, tail the most (-1: none); free the first
	// unused node (-1: none).
	head, tail, free int32
}

// prefixNode is one block in the recency list.
type prefixNode struct {
	hash       uint64
	prev, next int32
}

// NewPrefixRecord returns an empty record of capacity blocks.
func NewPrefixRecord(capacity int) *PrefixRecord {
	r := &PrefixRecord{Capacity: max(capacity, 1)}
	r.Clear()
	return r
}

// Len is the number of blocks kept.
func (r *PrefixRecord) Len() int { return len(r.index) }

// Match is how many leading blocks of blocks the record holds. What the record keeps of a
// prompt is a prefix of it, so presence falls from true to false once along the chain: a
// binary search finds where, in a few lookups even for a prompt of thousands of blocks.
func (r *PrefixRecord) Match(blocks []uint64) int {
	lo, hi := 0, len(blocks) // blocks[:lo] are held; blocks[hi:] are not
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if _, ok := r.index[blocks[mid]]; ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Insert records that the replica was sent blocks, most recently used now, and evicts the
// least recently used blocks beyond capacity. Of a prompt longer than the capacity only
// its first Capacity blocks are recorded: its tail would be evicted by its own head. It
// returns how many blocks were new to the record and how many it evicted for them.
func (r *PrefixRecord) Insert(blocks []uint64) (added, evicted int) {
	if r.index == nil {
		r.Clear()
	}
	limit := max(r.Capacity, 1)
	blocks = blocks[:min(len(blocks), limit)]
	for i := len(blocks) - 1; i >= 0; i-- {
		h := blocks[i]
		if n, ok := r.index[h]; ok {
			r.unlink(n)
			r.pushTail(n)
			continue
		}
		for len(r.index) >= limit {
			r.evictHead()
			evicted++
		}
		n := r.alloc(h)
		r.index[h] = n
		r.pushTail(n)
		added++
	}
	// The tail is the most recent: the prompt's first block, touched last. What goes
	// first is at the head: the oldest and, within one prompt, its tail blocks.
	evicted += r.Trim()
	return added, evicted
}

// EvictOldest forgets the n least recently used blocks (all when fewer are kept) and
// returns how many it forgot.
func (r *PrefixRecord) EvictOldest(n int) int {
	done := 0
	for ; done < n && r.head >= 0; done++ {
		r.evictHead()
	}
	return done
}

// Trim forgets the least recently used blocks beyond Capacity (after Capacity shrank) and
// returns how many.
func (r *PrefixRecord) Trim() int {
	return r.EvictOldest(len(r.index) - max(r.Capacity, 1))
}

// Clear forgets every block: the engine's cache was reset (a restart, new weights).
func (r *PrefixRecord) Clear() {
	r.index = make(map[uint64]int32)
	r.nodes = r.nodes[:0]
	r.head, r.tail, r.free = -1, -1, -1
}

func (r *PrefixRecord) alloc(h uint64) int32 {
	if n := r.free; n >= 0 {
		r.free = r.nodes[n].next
		r.nodes[n] = prefixNode{hash: h, prev: -1, next: -1}
		return n
	}
	r.nodes = append(r.nodes, prefixNode{hash: h, prev: -1, next: -1})
	return int32(len(r.nodes) - 1)
}

func (r *PrefixRecord) unlink(n int32) {
	nd := &r.nodes[n]
	if nd.prev >= 0 {
		r.nodes[nd.prev].next = nd.next
	} else {
		r.head = nd.next
	}
	if nd.next >= 0 {
		r.nodes[nd.next].prev = nd.prev
	} else {
		r.tail = nd.prev
	}
	nd.prev, nd.next = -1, -1
}

func (r *PrefixRecord) pushTail(n int32) {
	r.nodes[n].prev, r.nodes[n].next = r.tail, -1
	if r.tail >= 0 {
		r.nodes[r.tail].next = n
	} else {
		r.head = n
	}
	r.tail = n
}

func (r *PrefixRecord) evictHead() {
	n := r.head
	if n < 0 {
		return
	}
	r.unlink(n)
	delete(r.index, r.nodes[n].hash)
	r.nodes[n].next, r.free = r.free, n
}
