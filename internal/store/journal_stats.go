package store

// JournalStats are counters for metrics. Pending counts mutations not yet
// written (after merging).
type JournalStats struct {
	Pending       int
	Submitted     uint64 // accepted by Submit
	Merged        uint64 // absorbed into a pending mutation
	Written       uint64 // mutations applied
	Batches       uint64 // successful Apply calls
	FailedBatches uint64 // failed Apply calls (each is retried)
	DroppedTraces uint64 // trace events over MaxPendingTraces
	Rejected      uint64 // invalid mutations and those submitted after Close
	LastError     error  // of the last failed Apply, nil after a success
}

// Stats returns a snapshot of the journal's counters.
func (j *Journal) Stats() JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.Pending = len(j.pending) + j.inflight
	return s
}
