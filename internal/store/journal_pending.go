package store

// The Journal's pending queue: merging per key, and taking batches out.

type updateKey struct{ id, owner string }

// addLocked merges or appends m; full reports that a batch is ready.
func (j *Journal) addLocked(m Mutation) (full, accepted bool) {
	if j.closed {
		j.stats.Rejected++
		return false, false
	}
	switch m := m.(type) {
	case CreateRequest:
		if _, dup := j.creates[m.Request.ID]; !dup {
			j.creates[m.Request.ID] = len(j.pending)
		}
	case UpdateRequest:
		if i, ok := j.creates[m.ID]; ok {
			// A request is created once, under a new id, so its insert does not meet an
			// existing row: the update applied to the row it inserts is the update the
			// store would apply after it. The create keeps its place, before anything
			// submitted after it.
			c := j.pending[i].(CreateRequest)
			applyUpdate(&c.Request, m)
			j.pending[i] = c
			j.stats.Submitted++
			j.stats.Merged++
			return false, true
		}
		k := updateKey{m.ID, m.Owner}
		if i, ok := j.updates[k]; ok {
			j.pending[i] = mergeUpdates(j.pending[i].(UpdateRequest), m)
			j.stats.Submitted++
			j.stats.Merged++
			return false, true
		}
		j.updates[k] = len(j.pending)
	case UpsertAttempt:
		if i, ok := j.attempts[m.Attempt.ID]; ok {
			prev := j.pending[i].(UpsertAttempt)
			j.pending[i] = UpsertAttempt{Attempt: mergeAttempt(prev.Attempt, m.Attempt)}
			j.stats.Submitted++
			j.stats.Merged++
			return false, true
		}
		j.attempts[m.Attempt.ID] = len(j.pending)
	case AddTrace:
		if j.traces >= j.opts.MaxPendingTraces {
			j.stats.DroppedTraces++
			return false, false
		}
		j.traces++
		// Updates of the request submitted after the trace must be applied after it, so
		// that a reader who sees the outcome written after a trace also sees the trace,
		// whatever the batches are cut into: they no longer merge into the request's
		// earlier pending create or update (placed before the trace), but start anew.
		delete(j.creates, m.Event.RequestID)
		for k := range j.updates {
			if k.id == m.Event.RequestID {
				delete(j.updates, k)
			}
		}
	}
	j.pending = append(j.pending, m)
	j.stats.Submitted++
	return len(j.pending) >= j.opts.MaxBatch, true
}

// takeLocked moves all pending mutations out, split into batches.
func (j *Journal) takeLocked() [][]Mutation {
	if len(j.pending) == 0 {
		return nil
	}
	all := j.pending
	j.pending = nil
	clear(j.creates)
	clear(j.updates)
	clear(j.attempts)
	j.traces = 0
	j.inflight += len(all)
	var batches [][]Mutation
	for len(all) > 0 {
		n := min(len(all), j.opts.MaxBatch)
		batches = append(batches, all[:n:n])
		all = all[n:]
	}
	return batches
}
