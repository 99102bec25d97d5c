package request

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
)

// recordBoundary makes the delivery boundary of a keyed request durable before anything
// crosses it (the machine's ActRecordBoundary), so that after a crash another gateway can
// tell a safe rerun from an unsafe one. Its answer is the event the machine waits for: on
// failure nothing is written that the journal does not know of.
func (rn *Run) recordBoundary(now time.Time) failover.Event {
	rn.owner.check()
	ctx, cancel := context.WithTimeout(context.Background(), SyncWriteTimeout)
	err := rn.srv.Store().MarkFirstDelta(ctx, rn.p.ID, rn.srv.ID(), now)
	cancel()
	if err == nil {
		return failover.Event{Kind: failover.EvBoundaryRecorded}
	}
	code, msg := failover.EndJournalUnavailable, "the gateway could not record the delivery boundary durably, so it delivered nothing: "+err.Error()
	if errors.Is(err, store.ErrNotOwner) {
		code, msg = failover.EndOwnershipLost, "another gateway took over this request, so this one delivered nothing"
	}
	rn.srv.Log().Warn("delivery boundary not recorded", "request_id", rn.p.ID, "err", err)
	return failover.Event{Kind: failover.EvBoundaryRecorded, Reason: code,
		Err: &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: string(code), Message: msg}}
}
