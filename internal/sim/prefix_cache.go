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
// known blocks live in an LRU of bounded size. Only uncached tokens cost
// prefill time.
type prefixCache struct {
	blockSize int
	capacity  int

	mu    sync.Mutex
	lru   list.List // of uint64 block hashes; front is most recently used
	index map[uint64]*list.Element
	// publish, when set, gets the events of each change, as vLLM's KV events say them
	// (kvpublish.go); it is called under mu, so that events go out in the order of the
	// changes.
	publish func([]kvevents.Event)
}

func newPrefixCache(blockSize, capacity int) *prefixCache {
	return &prefixCache{
		blockSize: blockSize,
		capacity:  capacity,
		index:     make(map[uint64]*list.Element),
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
		e, ok := c.index[h]
		if !ok {
			break
		}
		c.lru.MoveToFront(e)
		hits++
	}
	return hits * c.blockSize
}

// insert records every full block of ids, evicting the least recently used
// blocks beyond capacity. The blocks are touched from the last to the first, as
// vLLM frees a finished request's blocks in reverse order "so that the tail
// blocks are evicted first": what stays of a prompt is always its head.
//
// With publish set, the change goes out as vLLM reports it: a BlockRemoved for each
// evicted block (vLLM evicts as it allocates, before it caches), then a BlockStored
// for each run of blocks new to the cache, with the hash of the block before the run as
// its parent (none for a run that starts the prompt), the run's token ids and the block
// size. A block both added and evicted by one insert (a prompt longer than the cache) is
// in neither.
func (c *prefixCache) insert(ids []uint32) {
	hashes := c.blockHashes(ids, -1)
	c.mu.Lock()
	defer c.mu.Unlock()
	var added map[uint64]bool
	var events []kvevents.Event
	if c.publish != nil {
		added = make(map[uint64]bool)
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if e, ok := c.index[h]; ok {
			c.lru.MoveToFront(e)
			continue
		}
		c.index[h] = c.lru.PushFront(h)
		if added != nil {
			added[h] = true
		}
		for c.lru.Len() > c.capacity {
			oldest := c.lru.Back()
			c.lru.Remove(oldest)
			old := oldest.Value.(uint64)
			delete(c.index, old)
			switch {
			case added == nil:
			case added[old]:
				delete(added, old)
			default:
				events = append(events, kvevents.Event{Kind: kvevents.Removed, Hashes: []kvevents.Hash{kvevents.IntHash(old)}, Medium: "GPU"})
			}
		}
	}
	if c.publish == nil {
		return
	}
	for i := 0; i < len(hashes); {
		if !added[hashes[i]] {
			i++
			continue
		}
		j := i
		var run []kvevents.Hash
		for ; j < len(hashes) && added[hashes[j]]; j++ {
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
	return len(c.index)
}
