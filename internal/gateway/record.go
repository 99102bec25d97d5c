package gateway

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
)

// Phases of a logical request, as GET /v1/requests/{id} reports them.
const (
	phaseRouting   = "routing"   // an attempt is being chosen or has not delivered output
	phaseStreaming = "streaming" // the delivery boundary was crossed
	phaseDone      = "done"
)

// requestRecord is the journal entry of one logical request: the answer to "what happened
// to my request?" after the connection is gone.
type requestRecord struct {
	ID                    string          `json:"id"`
	Object                string          `json:"object"`
	Model                 string          `json:"model"`
	Stream                bool            `json:"stream"`
	Tenant                string          `json:"-"`
	Phase                 string          `json:"phase"`
	Outcome               string          `json:"outcome,omitempty"`
	FirstDeltaSent        bool            `json:"first_delta_sent"`
	DeliveredOutputTokens int             `json:"delivered_output_tokens"`
	ModelRevision         string          `json:"model_revision,omitempty"`
	Error                 json.RawMessage `json:"error"`
	Attempts              []attemptRecord `json:"attempts"`
	CreatedAt             time.Time       `json:"created_at"`
	UpdatedAt             time.Time       `json:"updated_at"`
}

// attemptRecord is one attempt of a logical request.
type attemptRecord struct {
	ID          string    `json:"id"`
	N           int       `json:"n"`
	Replica     string    `json:"replica"`
	LeaseEpoch  uint64    `json:"lease_epoch"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	EndReason   string    `json:"end_reason,omitempty"`
	Failure     string    `json:"failure,omitempty"`
	CancelSent  bool      `json:"cancel_sent"`
	CancelAcked bool      `json:"cancel_acked"`
}

// memJournal keeps the most recent requests in memory, bounded.
type memJournal struct {
	mu    sync.Mutex
	byID  map[string]*requestRecord
	order []string // ring of ids, oldest first once full
	next  int
	limit int
	// changed is closed and replaced on every put, waking long-poll readers.
	changed chan struct{}
}

func newMemJournal(limit int) *memJournal {
	return &memJournal{byID: make(map[string]*requestRecord), limit: limit, changed: make(chan struct{})}
}

// put stores (a copy of) rec, replacing any earlier version.
func (j *memJournal) put(rec *requestRecord) {
	cp := *rec
	cp.Attempts = append([]attemptRecord(nil), rec.Attempts...)
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.byID[rec.ID]; !ok {
		if len(j.order) < j.limit {
			j.order = append(j.order, rec.ID)
		} else {
			delete(j.byID, j.order[j.next])
			j.order[j.next] = rec.ID
			j.next = (j.next + 1) % j.limit
		}
	}
	j.byID[rec.ID] = &cp
	close(j.changed)
	j.changed = make(chan struct{})
}

// get returns the record of id and a channel closed at the next change of the journal.
func (j *memJournal) get(id string) (*requestRecord, <-chan struct{}, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.byID[id]
	return r, j.changed, ok
}

func errorJSON(e *openai.Error) json.RawMessage {
	if e == nil {
		return json.RawMessage("null")
	}
	// The journal shows the error object itself, not the {"error":...} envelope.
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(e.AppendJSON(nil), &env) != nil {
		return json.RawMessage("null")
	}
	return env.Error
}
