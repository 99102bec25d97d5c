package gateway

import (
	"encoding/json"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// requestView is the JSON of GET /v1/requests/{id}: the answer to "what happened to my
// request?" after the connection is gone.
type requestView struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Model          string `json:"model"`
	Stream         bool   `json:"stream"`
	Phase          string `json:"phase"`
	Outcome        string `json:"outcome,omitempty"`
	FirstDeltaSent bool   `json:"first_delta_sent"`
	// FirstDeltaAt is when the first output was written to the client.
	FirstDeltaAt          time.Time `json:"first_delta_at,omitzero"`
	DeliveredOutputTokens int64     `json:"delivered_output_tokens"`
	// QueuedMs is how long the request waited in its pool's queue (docs/design.md §3).
	QueuedMs       int64           `json:"queued_ms"`
	ModelRevision  string          `json:"model_revision,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Owner          string          `json:"owner_gateway"`
	Error          json.RawMessage `json:"error"`
	Attempts       []attemptView   `json:"attempts"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

type attemptView struct {
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
	// ModelRevision is the weights revision of the replica the attempt ran on (written
	// when the attempt ends).
	ModelRevision string `json:"model_revision,omitempty"`
	// EngineMayHaveActed: the request let the engine run tools itself and this attempt's
	// body may have reached it, so a tool may have run (docs/design.md §5).
	EngineMayHaveActed bool `json:"engine_may_have_acted,omitempty"`
}

func viewOf(r *store.Request) requestView {
	v := requestView{
		ID: r.ID, Object: "fencegate.request", Model: r.Model, Stream: r.Stream, Phase: string(r.Phase),
		Outcome: string(r.Outcome), FirstDeltaSent: r.FirstDeltaSent, FirstDeltaAt: r.FirstDeltaAt, DeliveredOutputTokens: r.DeliveredOutputTokens,
		QueuedMs: r.QueuedMs, ModelRevision: r.ModelRevision, IdempotencyKey: r.IdempotencyKey, Owner: r.Owner,
		Error: json.RawMessage("null"), Attempts: []attemptView{}, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if len(r.Error) > 0 {
		// The journal keeps the {"error":{...}} envelope; the view shows the object.
		var env struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(r.Error, &env) == nil && len(env.Error) > 0 {
			v.Error = env.Error
		}
	}
	for _, a := range r.Attempts {
		v.Attempts = append(v.Attempts, attemptView{ID: a.ID, N: a.N, Replica: a.Replica, LeaseEpoch: a.LeaseEpoch,
			StartedAt: a.StartedAt, EndedAt: a.EndedAt, EndReason: a.EndReason, Failure: a.Failure,
			CancelSent: a.CancelSent, CancelAcked: a.CancelAcked, ModelRevision: a.ModelRevision,
			EngineMayHaveActed: a.EngineMayHaveActed})
	}
	return v
}
