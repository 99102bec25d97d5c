package kvevents

// restoredBlocks recognizes, within one batch, blocks that are removed and at once stored
// again: SGLang's radix cache, in its earlier releases, publishes a node split (a prompt
// that shares only part of a cached node) as the node's removal, page by page, followed
// straight away by the stores of its two halves — the same pages, in the same order, held
// all along. Counted as stored, they would teach the tracker that the engine stores more
// tokens than the gateway sent new bytes for, and shrink the record.
//
// Only that shape is matched: a run of removals, and the stores right after it whose
// blocks are the run's, in its order. A block hash alone would not do: those releases hash
// a page's token ids without its position (at the default page of one token, every "the"
// has one hash), so an eviction of unrelated blocks and a new prompt in one step would
// cancel each other's common tokens. A run of pages in order that an engine truly evicts
// and computes again in one step is rare (the computation would have found them cached),
// and counting it as nothing errs towards a larger record, the side the approximate
// record is on anyway.
type restoredBlocks struct {
	run     []Hash // the last run of removed blocks, in order
	next    int    // the first block of run not yet stored again
	storing bool   // a store followed the run: a removal now starts a new one
}

func (r *restoredBlocks) reset() {
	r.run, r.next, r.storing = r.run[:0], 0, false
}

// removed records removed blocks: they extend the current run of removals, or start a
// new one after a store.
func (r *restoredBlocks) removed(hashes []Hash) {
	if r.storing {
		r.reset()
	}
	r.run = append(r.run, hashes...)
}

// storedAgain returns how many of e's tokens are in blocks the run removed just before,
// stored again in its order. A block that breaks the order ends the run.
func (r *restoredBlocks) storedAgain(e Event) int {
	r.storing = true
	again := 0
	for _, h := range e.Hashes {
		if r.next >= len(r.run) || r.run[r.next] != h {
			r.run, r.next = r.run[:0], 0
			break
		}
		r.next++
		again++
	}
	switch {
	case again == 0:
		return 0
	case again == len(e.Hashes):
		return e.StoredTokens()
	default: // a store's blocks are of one size
		return e.StoredTokens() * again / len(e.Hashes)
	}
}
