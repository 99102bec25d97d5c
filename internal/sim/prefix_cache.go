package sim

import (
	"container/list"
	"slices"
	"sync"

	"github.com/fencegate/fencegate/internal/kvevents"
)

// prefixCache models vLLM's automatic prefix caching: prompt token ids are
// cut into full blocks, each block is identified by a hash chained over all
// blocks before it (so a block only matches under the same prefix), and the
// cached blocks live in an LRU of bounded size. Only uncached tokens cost
// prefill time. Like vLLM's (its BlockHashToBlockMap "does not de-duplicate"),
// the cache keeps a block for every request that computed it: two requests that
// prefill the same new prefix at once both cache it, each copy takes room, each
// is published when stored and when evicted, and a lookup hits any of them.
type prefixCache struct {
	blockSize int
	capacity  int

	mu    sync.Mutex
	lru   list.List // of uint64 block hashes, one element a cached block; front is most recently used
	index map[uint64][]*list.Element
	// publish, when set, gets the events of each change, as vLLM's KV events say them
	// (kvpublish.go); it is called under mu, so that events go out in the order of the
	// changes.
	publish func([]kvevents.Event)
}

func newPrefixCache(blockSize, capacity int) *prefixCache {
	return &prefixCache{
		blockSize: blockSize,
		capacity:  capacity,
		index:     make(map[uint64][]*list.Element),
	}
}

// blockHashes returns the chained hashes of the first maxBlocks full blocks
// of ids (all full blocks when maxBlocks < 0).
func (c *prefixCache) blockHashes(ids []uint32, maxBlocks int) []uint64 {
	n := len(ids) / c.blockSize
	if maxBlocks >= 0 && n > maxBlocks {
		n = maxBlocks
	}
	hashes := make([]uint64, n)
	parent := uint64(fnvOffset)
	for b := range n {
		h := parent
		for _, id := range ids[b*c.blockSize : (b+1)*c.blockSize] {
			h = mix64(h ^ uint64(id))
		}
		hashes[b] = h
		parent = h
	}
	return hashes
}

// lookup returns how many leading prompt tokens are already cached. Like
// vLLM it never reports the whole prompt as cached: the last prompt token is
// always computed, so at most the full blocks within the first len(ids)-1
// tokens can hit.
func (c *prefixCache) lookup(ids []uint32) int {
	if len(ids) == 0 {
		return 0
	}
	hashes := c.blockHashes(ids, (len(ids)-1)/c.blockSize)
	c.mu.Lock()
	defer c.mu.Unlock()
	hits := 0
	for _, h := range hashes {
		copies := c.index[h]
		if len(copies) == 0 {
			break
		}
		c.lru.MoveToFront(copies[0])
		hits++
	}
	return hits * c.blockSize
}

// insert records every full block of ids, evicting the least recently used
// blocks beyond capacity. The first ownBlocks blocks are the caller's already
// (found cached when it looked them up, or cached by its earlier insert): they
// are touched, and cached again only if they were evicted since. The blocks
// after them the caller computed: each is cached as a block of its own, even
// when another request cached the same block meanwhile (vLLM does not merge
// them). The blocks are touched from the last to the first, as vLLM frees a
// finished request's blocks in reverse order "so that the tail blocks are
// evicted first": what stays of a prompt is always its head.
//
// With publish set, the change goes out as vLLM reports it: a BlockRemoved for each
// evicted block (vLLM evicts as it allocates, before it caches), then a BlockStored
// for each run of blocks new to the cache, with the hash of the block before the run as
// its parent (none for a run that starts the prompt), the run's token ids and the block
// size. A block both added and evicted by one insert (a prompt longer than the cache) is
// in neither.
func (c *prefixCache) insert(ids []uint32, ownBlocks int) {
	hashes := c.blockHashes(ids, -1)
	c.mu.Lock()
	defer c.mu.Unlock()
	added := make([]bool, len(hashes))
	var addedAt map[*list.Element]int // the blocks this insert cached, by position
	if c.publish != nil {
		addedAt = make(map[*list.Element]int)
	}
	var events []kvevents.Event
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if copies := c.index[h]; i < ownBlocks && len(copies) > 0 {
			c.lru.MoveToFront(copies[0])
			continue
		}
		e := c.lru.PushFront(h)
		c.index[h] = append(c.index[h], e)
		added[i] = true
		if addedAt != nil {
			addedAt[e] = i
		}
		for c.lru.Len() > c.capacity {
			oldest := c.lru.Back()
			c.remove(oldest)
			if pos, ok := addedAt[oldest]; ok {
				added[pos] = false
				continue
			}
			if addedAt != nil {
				events = append(events, kvevents.Event{Kind: kvevents.Removed,
					Hashes: []kvevents.Hash{kvevents.IntHash(oldest.Value.(uint64))}, Medium: "GPU"})
			}
		}
	}
	if c.publish == nil {
		return
	}
	for i := 0; i < len(hashes); {
		if !added[i] {
			i++
			continue
		}
		j := i
		var run []kvevents.Hash
		for ; j < len(hashes) && added[j]; j++ {
			run = append(run, kvevents.IntHash(hashes[j]))
		}
		ev := kvevents.Event{Kind: kvevents.Stored, Hashes: run, TokenIDs: slices.Clone(ids[i*c.blockSize : j*c.blockSize]),
			BlockSize: c.blockSize, Medium: "GPU"}
		ev.Tokens = len(ev.TokenIDs)
		if i > 0 {
			ev.Parent = kvevents.IntHash(hashes[i-1])
		}
		events = append(events, ev)
		i = j
	}
	c.publish(events)
}

// remove takes block e out of the cache. Callers hold mu.
func (c *prefixCache) remove(e *list.Element) {
	c.lru.Remove(e)
	h := e.Value.(uint64)
	copies := c.index[h]
	for k, x := range copies {
		if x == e {
			copies = append(copies[:k], copies[k+1:]...)
			break
		}
	}
	if len(copies) == 0 {
		delete(c.index, h)
	} else {
		c.index[h] = copies
	}
}

// clear empties the cache as vLLM's reset_prefix_cache does, which publishes
// AllBlocksCleared.
func (c *prefixCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.index)
	if c.publish != nil {
		c.publish([]kvevents.Event{{Kind: kvevents.Cleared}})
	}
}

// reset empties the cache, as a restarted engine starts with cold KV memory.
func (c *prefixCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.index)
}

// len is the number of blocks cached.
func (c *prefixCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
