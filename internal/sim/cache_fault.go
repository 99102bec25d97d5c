package sim

// The cache fault (Config.CacheFault) stands for a KV-cache bug of the kind reported against
// real engines: the same prompt at temperature 0 gives another answer once its prefix comes
// from the prefix cache and the cached part ends exactly at a block edge. The cold path is
// untouched, and so is the prefill's cost: only the answer of a hit at the edge changes.

// CacheFaultBlockBoundary is the cache fault that changes the answer of a prompt whose
// every token but the last came from the prefix cache, the cached part ending at a block
// edge: a prompt of k·block_size+1 tokens sent a second time.
const CacheFaultBlockBoundary = "block-boundary"

// cacheFaultHits says whether the configured cache fault changes the answer of a sequence
// whose prompt of n tokens found cached of them in the prefix cache.
func (s *Server) cacheFaultHits(n, cached int) bool {
	return s.cfg.CacheFault == CacheFaultBlockBoundary && cached > 0 && cached == n-1 &&
		cached%s.cfg.blockSize() == 0
}

// corrupt makes q answer as if its attention had read a wrong block: the same sequence,
// its text decided otherwise.
func (g *generation) corrupt(q *sequence) {
	n := g.spec.n
	*q = *newSequence(g.salt+"\x00cache-fault", g.s.cfg.ToolCallIDStyle, &g.spec, q.choice/n, q.choice%n)
}
