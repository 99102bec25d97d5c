package store

import (
	"errors"
	"fmt"
	"time"
)

// Mutation is one journal write: CreateRequest, UpdateRequest,
// UpsertAttempt or AddTrace. Every mutation is idempotent (applying it twice
// leaves the same row), so a batch whose commit was ambiguous can be
// applied again.
type Mutation interface {
	// requestID names the logical request the mutation belongs to.
	requestID() string
	validate() error
}

// CreateRequest inserts a logical request without an idempotency key (keyed
// requests go through Store.Claim, which decides atomically). Inserting an
// id that already exists is a no-op. Set ExpiresAt: a row without one is
// never swept.
type CreateRequest struct {
	Request Request
}

// UpdateRequest changes a running logical request. Zero-valued fields mean
// "unchanged", and each field has the merge rule written on it, so that two
// updates applied one after the other equal their merge (the Journal relies
// on this to coalesce).
type UpdateRequest struct {
	ID string
	// Owner, when set, fences the update: it applies only while the row is
	// still owned by this gateway, so a gateway whose request was taken over
	// cannot overwrite the new owner's record.
	Owner string
	// At becomes updated_at when it is later than the stored one.
	At    time.Time
	Phase Phase // the last one set wins
	// Outcome is write-once: ignored when the row already has one.
	Outcome Outcome
	// FirstDeltaSent sets the boundary latch (false leaves it as it is). For
	// keyed requests use Store.MarkFirstDelta, which is synchronous.
	FirstDeltaSent bool
	// FirstDeltaAt is when the first output was written to the client; the first one
	// given wins, and one the row has already (Store.MarkFirstDelta's) is kept.
	FirstDeltaAt time.Time
	// DeliveredOutputTokens only grows: the larger of stored and given wins.
	DeliveredOutputTokens int64
	// QueuedMs, the request's time in its pool's queue, only grows too.
	QueuedMs      int64
	ModelRevision string // the last non-empty one wins
	Error         []byte // the last non-nil one wins
	// Response, when non-nil, replaces the stored response together with
	// ResponseIsSSE and ResponseStatus. Ignored for requests without an
	// idempotency key.
	Response       []byte
	ResponseIsSSE  bool
	ResponseStatus int
	// ResponseID, when non-empty, replaces the stored ResponseID and
	// ResponseReplica together (the last non-empty one wins): an id is
	// only meaningful with the replica that holds it, so the two are never
	// mixed from different updates. An empty ResponseID leaves both as
	// they are, and ResponseReplica is then ignored. The last one wins,
	// rather than the first, because when an attempt fails before the
	// delivery boundary and the request moves to another replica, the
	// response the client receives, and may continue, is the new one.
	ResponseID      string
	ResponseReplica string
}

// UpsertAttempt inserts or updates an attempt. On update: Replica,
// EndReason, Failure and ModelRevision keep the stored value when given empty, StartedAt and EndedAt
// when given zero; LeaseEpoch only grows; CancelSent, CancelAcked and
// EngineMayHaveActed are one-way latches.
type UpsertAttempt struct {
	Attempt Attempt
}

// AddTrace appends one trace event; an event with an existing (RequestID,
// Seq) is ignored.
type AddTrace struct {
	Event TraceEvent
}

func (m CreateRequest) requestID() string { return m.Request.ID }
func (m UpdateRequest) requestID() string { return m.ID }
func (m UpsertAttempt) requestID() string { return m.Attempt.RequestID }
func (m AddTrace) requestID() string      { return m.Event.RequestID }

func (m CreateRequest) validate() error {
	r := &m.Request
	switch {
	case r.ID == "":
		return errors.New("store: create request: id is empty")
	case r.Phase == "":
		return fmt.Errorf("store: create request %s: phase is empty", r.ID)
	case r.CreatedAt.IsZero():
		return fmt.Errorf("store: create request %s: created time is zero", r.ID)
	}
	return nil
}

func (m UpdateRequest) validate() error {
	if m.ID == "" {
		return errors.New("store: update request: id is empty")
	}
	if m.QueuedMs < 0 {
		return fmt.Errorf("store: update request %s: negative queued time %d ms", m.ID, m.QueuedMs)
	}
	if m.DeliveredOutputTokens < 0 {
		return fmt.Errorf("store: update request %s: negative delivered tokens %d", m.ID, m.DeliveredOutputTokens)
	}
	return nil
}

func (m UpsertAttempt) validate() error {
	a := &m.Attempt
	switch {
	case a.ID == "" || a.RequestID == "":
		return fmt.Errorf("store: upsert attempt %q: id and request id are required", a.ID)
	case a.N < 1:
		return fmt.Errorf("store: upsert attempt %s: n must be >= 1, got %d", a.ID, a.N)
	}
	return nil
}

func (m AddTrace) validate() error {
	if m.Event.RequestID == "" {
		return errors.New("store: add trace: request id is empty")
	}
	return nil
}

// ValidateMutation reports why a mutation cannot be applied, or nil. Apply
// rejects a batch holding an invalid mutation; Journal.Submit drops (and
// counts) it instead, since the token path cannot handle an error.
func ValidateMutation(m Mutation) error {
	if m == nil {
		return errors.New("store: nil mutation")
	}
	return m.validate()
}

// applyUpdate is the Go model of UpdateRequest, used by the memory store. The
// SQL statements in sql_statements.go implement the same rules.
func applyUpdate(r *Request, u *UpdateRequest) {
	if u.Owner != "" && r.Owner != u.Owner {
		return
	}
	if at := normTime(u.At); at.After(r.UpdatedAt) {
		r.UpdatedAt = at
	}
	if u.Phase != "" {
		r.Phase = u.Phase
	}
	if r.Outcome == OutcomeRunning {
		r.Outcome = u.Outcome
	}
	r.FirstDeltaSent = r.FirstDeltaSent || u.FirstDeltaSent
	if r.FirstDeltaAt.IsZero() {
		r.FirstDeltaAt = normTime(u.FirstDeltaAt)
	}
	r.DeliveredOutputTokens = max(r.DeliveredOutputTokens, u.DeliveredOutputTokens)
	r.QueuedMs = max(r.QueuedMs, u.QueuedMs)
	if u.ModelRevision != "" {
		r.ModelRevision = u.ModelRevision
	}
	if u.Error != nil {
		r.Error = cloneBytes(u.Error)
	}
	if u.Response != nil && r.IdempotencyKey != "" {
		r.Response = cloneBytes(u.Response)
		r.ResponseIsSSE = u.ResponseIsSSE
		r.ResponseStatus = u.ResponseStatus
	}
	if u.ResponseID != "" {
		r.ResponseID, r.ResponseReplica = u.ResponseID, u.ResponseReplica
	}
}

// mergeUpdateInto makes m the one update equal to applying m then b; both must carry the
// same ID and Owner. By pointer, in place, as the Journal merges under a request
// goroutine's deepest frames.
func mergeUpdateInto(m, b *UpdateRequest) {
	if b.At.After(m.At) {
		m.At = b.At
	}
	if b.Phase != "" {
		m.Phase = b.Phase
	}
	if m.Outcome == OutcomeRunning {
		m.Outcome = b.Outcome
	}
	m.FirstDeltaSent = m.FirstDeltaSent || b.FirstDeltaSent
	if m.FirstDeltaAt.IsZero() {
		m.FirstDeltaAt = b.FirstDeltaAt
	}
	m.DeliveredOutputTokens = max(m.DeliveredOutputTokens, b.DeliveredOutputTokens)
	m.QueuedMs = max(m.QueuedMs, b.QueuedMs)
	if b.ModelRevision != "" {
		m.ModelRevision = b.ModelRevision
	}
	if b.Error != nil {
		m.Error = b.Error
	}
	if b.Response != nil {
		m.Response, m.ResponseIsSSE, m.ResponseStatus = b.Response, b.ResponseIsSSE, b.ResponseStatus
	}
	if b.ResponseID != "" {
		m.ResponseID, m.ResponseReplica = b.ResponseID, b.ResponseReplica
	}
}

// mergeAttempt returns the stored attempt after an upsert of next over
// prev; it is also how the Journal coalesces two upserts of one attempt.
func mergeAttempt(prev, next Attempt) Attempt {
	fillAttempt(&next, &prev)
	return next
}

// fillAttempt is mergeAttempt in place: next, the later record, takes from prev what it
// does not say.
func fillAttempt(next, prev *Attempt) {
	if next.Replica == "" {
		next.Replica = prev.Replica
	}
	next.LeaseEpoch = max(prev.LeaseEpoch, next.LeaseEpoch)
	if next.StartedAt.IsZero() {
		next.StartedAt = prev.StartedAt
	}
	if next.EndedAt.IsZero() {
		next.EndedAt = prev.EndedAt
	}
	if next.EndReason == "" {
		next.EndReason = prev.EndReason
	}
	if next.Failure == "" {
		next.Failure = prev.Failure
	}
	if next.ModelRevision == "" {
		next.ModelRevision = prev.ModelRevision
	}
	next.CancelSent = prev.CancelSent || next.CancelSent
	next.CancelAcked = prev.CancelAcked || next.CancelAcked
	next.EngineMayHaveActed = prev.EngineMayHaveActed || next.EngineMayHaveActed
}
