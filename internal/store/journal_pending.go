package store

// The Journal's pending queue: merging per key, and taking batches out.

type updateKey struct{ id, owner string }

// addLocked adds m to the pending mutations, merged into an earlier one of its row when it
// can be. Each kind is handled by a function of its own: a type switch that bound the
// mutation's value here would hold a copy of every kind's struct in this frame (2.4 KiB),
// on the path of every journal update a request's goroutine makes, which was enough to
// double a streaming request's stack (docs/performance.md).
func (j *Journal) addLocked(m Mutation) (full, accepted bool) {
	if j.closed {
		j.stats.Rejected++
		return false, false
	}
	merged := false
	switch m.(type) {
	case CreateRequest:
		j.noteCreate(m)
	case UpdateRequest:
		merged = j.mergeUpdate(m)
	case UpsertAttempt:
		merged = j.mergeAttemptUpsert(m)
	case AddTrace:
		if !j.noteTrace(m) {
			j.stats.DroppedTraces++
			return false, false
		}
	}
	j.stats.Submitted++
	if merged {
		j.stats.Merged++
		return false, true
	}
	j.pending = append(j.pending, m)
	return len(j.pending) >= j.opts.MaxBatch, true
}

// noteCreate records where the CreateRequest m will be in pending, so that the request's
// later updates merge into it.
//
//go:noinline
func (j *Journal) noteCreate(m Mutation) {
	id := m.(CreateRequest).Request.ID
	if _, dup := j.creates[id]; !dup {
		j.creates[id] = len(j.pending)
	}
}

// mergeUpdate merges the UpdateRequest m into its request's pending create or update, and
// reports whether it did; otherwise it records where m will be in pending.
//
//go:noinline
func (j *Journal) mergeUpdate(m Mutation) bool {
	u := &j.merging.update
	*u = m.(UpdateRequest)
	defer func() { *u = UpdateRequest{} }()
	if i, ok := j.creates[u.ID]; ok {
		j.mergeIntoCreate(i, u)
		return true
	}
	k := updateKey{u.ID, u.Owner}
	if i, ok := j.updates[k]; ok {
		j.mergeIntoUpdate(i, u)
		return true
	}
	j.updates[k] = len(j.pending)
	return false
}

// mergeIntoCreate applies u to the pending CreateRequest at i. A request is created once,
// under a new id, so its insert does not meet an existing row: the update applied to the
// row it inserts is the update the store would apply after it. The create keeps its place,
// before anything submitted after it.
//
//go:noinline
func (j *Journal) mergeIntoCreate(i int, u *UpdateRequest) {
	c := &j.merging.create
	*c = j.pending[i].(CreateRequest)
	applyUpdate(&c.Request, u)
	j.pending[i] = *c
	*c = CreateRequest{}
}

// mergeIntoUpdate merges u into the pending UpdateRequest at i.
//
//go:noinline
func (j *Journal) mergeIntoUpdate(i int, u *UpdateRequest) {
	prev := &j.merging.prev
	*prev = j.pending[i].(UpdateRequest)
	mergeUpdateInto(prev, u)
	j.pending[i] = *prev
	*prev = UpdateRequest{}
}

// mergeAttemptUpsert merges the UpsertAttempt m into its attempt's pending upsert, and
// reports whether it did; otherwise it records where m will be in pending.
//
//go:noinline
func (j *Journal) mergeAttemptUpsert(m Mutation) bool {
	a := m.(UpsertAttempt)
	if i, ok := j.attempts[a.Attempt.ID]; ok {
		j.mergeIntoAttempt(i, &a)
		return true
	}
	j.attempts[a.Attempt.ID] = len(j.pending)
	return false
}

// mergeIntoAttempt merges a into the pending UpsertAttempt at i.
//
//go:noinline
func (j *Journal) mergeIntoAttempt(i int, a *UpsertAttempt) {
	prev := j.pending[i].(UpsertAttempt)
	fillAttempt(&a.Attempt, &prev.Attempt)
	j.pending[i] = *a
}

// noteTrace counts the AddTrace m against MaxPendingTraces, and reports false when it must
// be dropped.
//
//go:noinline
func (j *Journal) noteTrace(m Mutation) bool {
	if j.traces >= j.opts.MaxPendingTraces {
		return false
	}
	j.traces++
	// Updates of the request submitted after the trace must be applied after it, so
	// that a reader who sees the outcome written after a trace also sees the trace,
	// whatever the batches are cut into: they no longer merge into the request's
	// earlier pending create or update (placed before the trace), but start anew.
	id := m.(AddTrace).Event.RequestID
	delete(j.creates, id)
	for k := range j.updates {
		if k.id == id {
			delete(j.updates, k)
		}
	}
	return true
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
