package store

import "time"

// Phase is how far a logical request has progressed: queued → routing →
// streaming → done. The store records what the owner says; it is the
// owner's state machine that keeps phases moving forward.
type Phase string

const (
	PhaseQueued    Phase = "queued"    // accepted, waiting for a replica slot
	PhaseRouting   Phase = "routing"   // an attempt is being started (or rerun)
	PhaseStreaming Phase = "streaming" // the delivery boundary was crossed
	PhaseDone      Phase = "done"      // an outcome was recorded
)

// Outcome is how a logical request ended. The empty outcome means the
// request is still running. Once set, the store never changes an outcome
// (write-once), so a late write from a fenced gateway cannot turn an
// interruption into a success.
type Outcome string

const (
	OutcomeRunning     Outcome = ""            // no outcome yet
	OutcomeCompleted   Outcome = "completed"   // the full answer was delivered
	OutcomeInterrupted Outcome = "interrupted" // upstream failed after the delivery boundary
	OutcomeFailed      Outcome = "failed"      // ended with an error before any output
	OutcomeCancelled   Outcome = "cancelled"   // the client went away
	// OutcomeClientStalled: the client stopped accepting bytes for client_write_timeout
	// and was let go, its upstream cancelled.
	OutcomeClientStalled Outcome = "client_stalled"
)

// Request is one logical request as the journal records it.
//
// Times are stored with nanosecond precision in UTC; a zero time.Time means
// "not set".
type Request struct {
	ID             string // req_<ULID>
	Tenant         string // API key id; "" when auth is off
	IdempotencyKey string // "" when the client sent none
	BodyHash       string // hex sha256 of the request body (see HashBody)
	Model          string
	Stream         bool

	Phase   Phase
	Outcome Outcome

	// Owner is the id of the gateway that runs the request; it may publish
	// only while OwnerLeaseUntil is in the future (Store.RenewOwner extends
	// it; Store.MarkFirstDelta enforces it at the delivery boundary).
	Owner           string
	OwnerLeaseUntil time.Time

	// FirstDeltaSent is the delivery-boundary latch: set before the first
	// output-bearing write to the client, never cleared.
	FirstDeltaSent        bool
	FirstDeltaAt          time.Time
	DeliveredOutputTokens int64
	ModelRevision         string
	// QueuedMs is how long the request waited in its pool's queue, in
	// milliseconds, all its waits together.
	QueuedMs int64

	// Error is the OpenAI-shaped error body the request ended with, or nil.
	Error []byte

	// Response holds the final response bytes for replay. It is kept only
	// for requests with an IdempotencyKey (the store ignores it for the
	// others). ResponseIsSSE says whether it is an SSE stream;
	// ResponseStatus is the HTTP status it was sent with.
	Response       []byte
	ResponseIsSSE  bool
	ResponseStatus int

	// ResponseID is the id the inference engine gave the response of an
	// OpenAI Responses API request ("resp_…"), and ResponseReplica the
	// replica that produced it. The engine keeps that response's state
	// itself, so a later request continuing it (previous_response_id) can
	// only be served by that replica; Store.FindByResponseID is how the
	// gateway finds it. Both are "" for other APIs and until the engine
	// has answered. Unlike Response they are kept with or without an
	// idempotency key: continuing a response needs no key. A replica is
	// stored only together with an id.
	ResponseID      string
	ResponseReplica string

	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the row (and with it the idempotency key) may be
	// deleted by Sweep; a Claim at or after it treats the key as unused.
	ExpiresAt time.Time

	// Attempts are filled by Get and Claim, ordered by N.
	Attempts []Attempt
}

// Attempt is one try of a logical request on one replica.
type Attempt struct {
	ID         string // <request_id>.a<N>, see AttemptID
	RequestID  string
	N          int // 1-based
	Replica    string
	LeaseEpoch uint64
	StartedAt  time.Time
	EndedAt    time.Time // zero while running
	EndReason  string
	// Failure is the class of upstream failure that ended the attempt
	// (e.g. dead, uncertain, overloaded, client_gone); empty when it ended
	// without one.
	Failure string
	// CancelSent and CancelAcked are one-way latches: an upsert can set
	// them, never clear them.
	CancelSent  bool
	CancelAcked bool
	// ModelRevision is the weights revision of the replica the attempt ran on, as the
	// gateway knew it when the attempt started; "" when unknown. An upsert that gives ""
	// keeps the stored one.
	ModelRevision string
	// EngineMayHaveActed: the request lets the engine run tools itself and this attempt's
	// body may have reached an engine, which may have run one (docs/design.md §5). A
	// one-way latch, as CancelSent.
	EngineMayHaveActed bool
}

// TraceEvent is one entry of a request's optional event trace. Traces are
// written only when the gateway's configuration switches them on.
type TraceEvent struct {
	RequestID string
	Seq       int64 // order within the request, chosen by the writer
	At        time.Time
	Kind      string
	Payload   []byte
}

// NextAttemptN returns the number of the next attempt: one more than the
// highest N in Attempts (1 when there are none).
func (r *Request) NextAttemptN() int {
	n := 0
	for _, a := range r.Attempts {
		n = max(n, a.N)
	}
	return n + 1
}

// normalize puts a row into the form the store keeps: times without
// monotonic reading and in UTC, no response without an idempotency key, no
// response replica without a response id, no attempts (they live in their
// own table).
func (r *Request) normalize() {
	r.Attempts = nil
	r.OwnerLeaseUntil = normTime(r.OwnerLeaseUntil)
	r.FirstDeltaAt = normTime(r.FirstDeltaAt)
	r.CreatedAt = normTime(r.CreatedAt)
	r.UpdatedAt = normTime(r.UpdatedAt)
	r.ExpiresAt = normTime(r.ExpiresAt)
	if r.IdempotencyKey == "" {
		r.Response, r.ResponseIsSSE, r.ResponseStatus = nil, false, 0
	}
	if r.ResponseID == "" {
		r.ResponseReplica = "" // as UpdateRequest: a replica means nothing without the id it holds
	}
}

// clone returns a deep copy, so callers of the memory store (and of the
// journal) can never alias stored byte slices.
func (r *Request) clone() *Request {
	c := *r
	c.Error = cloneBytes(r.Error)
	c.Response = cloneBytes(r.Response)
	if r.Attempts != nil {
		c.Attempts = append([]Attempt(nil), r.Attempts...)
	}
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
