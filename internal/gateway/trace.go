package gateway

import (
	"encoding/json"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// trace journals one event of the request when traces are on (config traces: true). Traces
// record the input and what happened to it, so a failure can be replayed against a
// simulator; they are off by default because inputs may be private.
func (rn *run) trace(now time.Time, kind string, payload any) {
	if !rn.cfg.Traces {
		return
	}
	var b []byte
	switch p := payload.(type) {
	case nil:
	case []byte:
		b = p
	default:
		b, _ = json.Marshal(p)
	}
	rn.traceSeq++
	rn.s.journal.Submit(store.AddTrace{Event: store.TraceEvent{RequestID: rn.id, Seq: rn.traceSeq, At: now, Kind: kind, Payload: b}})
}

// attemptTrace is the payload of attempt events.
type attemptTrace struct {
	Attempt   string `json:"attempt"`
	Replica   string `json:"replica"`
	Epoch     uint64 `json:"lease_epoch,omitempty"`
	Revision  string `json:"model_revision,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
	Failure   string `json:"failure,omitempty"`
}
